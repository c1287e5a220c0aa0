package exact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// stream is one output stream of a live process: what it printed goes to
// a file (its first wire.MaxExactFileBytes; the rest is drained and
// dropped), and followers are woken when the file grows or the stream
// ends.
type stream struct {
	f    *os.File
	mu   sync.Mutex
	size int64
	wake chan struct{} // closed (and replaced) on each growth, and at the end
	done bool
}

func newStream(path string) (*stream, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("exact process output: %w", err)
	}
	s := &stream{f: f, wake: make(chan struct{})}
	return s, nil
}

func (s *stream) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := min(int64(len(b)), wire.MaxExactFileBytes-s.size)
	if keep > 0 {
		n, err := s.f.Write(b[:keep])
		s.size += int64(n)
		close(s.wake)
		s.wake = make(chan struct{})
		if err != nil {
			return n, err
		}
	}
	return len(b), nil
}

// Close ends the stream.
func (s *stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	close(s.wake)
	return s.f.Close()
}

func (s *stream) state() (<-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake, s.done
}

// Output writes what a process printed on stream (stdout or stderr) to w,
// calling flush after each part, and follows it until the process ends
// (or ctx does).
func (m *Manager) Output(ctx context.Context, id string, pid int64, name string, w io.Writer, flush func()) error {
	if name != "stdout" && name != "stderr" {
		return &RequestError{Msg: "stream must be stdout or stderr"}
	}
	p, _, err := m.lookup(ctx, id, pid)
	if err != nil {
		return err
	}
	f, err := os.Open(m.outPath(id, pid, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil // it never started
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var s *stream
	if p != nil {
		s = p.out[name]
	}
	buf := make([]byte, 32<<10)
	for {
		var wake <-chan struct{}
		done := true
		if s != nil {
			wake, done = s.state()
		}
		// Everything written before state() was asked is read now;
		// anything later wakes this reader.
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		flush()
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
