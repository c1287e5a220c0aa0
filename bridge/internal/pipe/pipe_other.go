//go:build !linux

package pipe

import (
	"errors"
	"os"
)

// Open is a harness's stdout: the write end for the child, and its
// reader.
func Open() (*Reader, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	return &Reader{f: r}, w, nil
}

// Reader reads the read end of a pipe. Read and Close belong to the
// one goroutine that reads; Stop may be called from any goroutine.
type Reader struct{ f *os.File }

func (r *Reader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if errors.Is(err, os.ErrClosed) {
		err = ErrStopped
	}
	return n, err
}

// Stop makes a waiting Read, and every later one, return ErrStopped.
func (r *Reader) Stop() { r.f.Close() }

// Close releases the pipe; it is called once, after the last Read.
func (r *Reader) Close() error { r.f.Close(); return nil }
