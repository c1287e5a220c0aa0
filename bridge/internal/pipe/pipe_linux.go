package pipe

import (
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Size is the capacity asked for the pipe: a harness that prints a burst
// faster than its reader reads is held back only after that much (the
// default is 64 KiB), so a reader's short pause does not stall it. Linux
// grants up to fs.pipe-max-size (1 MiB by default).
const Size = 1 << 20

// Open makes a pipe: the write end for the child's stdout, and a reader
// that waits in poll(2) of its own rather than in the runtime's network
// poller.
//
// The poller keeps a pipe registered for as long as it is open, so every
// write to it wakes the poller, even while no reader waits (between the
// reads of a batch, a reader that reads in windows). A harness printing a
// line per token then costs the host a wake of the reading process, and
// the harness a cross-CPU wake-up, per line. Here nothing waits on the
// pipe between two reads, so a burst costs one wake per read.
func Open() (*Reader, *os.File, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	// Only the read end is non-blocking: the write end is the child's
	// stdout, which it may expect to block when full.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	// A refusal keeps the pipe's size.
	unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, Size)
	return &Reader{fd: fds[0], stop: stop}, os.NewFile(uintptr(fds[1]), "|1"), nil
}

// Reader reads the read end of a pipe. Read and Close belong to the
// one goroutine that reads; Stop may be called from any goroutine, also
// after Close.
type Reader struct {
	fd, stop int
	stopped  atomic.Bool
	// mu orders Stop's write to the eventfd before Close closes it: a
	// Stop that came late must not write to a descriptor that Close freed
	// and the process has since opened again (a store file, another pipe).
	mu       sync.Mutex
	signaled bool // the eventfd was written
	closed   bool
}

func (r *Reader) Read(b []byte) (int, error) {
	for {
		if r.stopped.Load() {
			return 0, ErrStopped
		}
		if len(b) == 0 {
			return 0, nil
		}
		n, err := unix.Read(r.fd, b)
		switch {
		case err == nil && n == 0:
			return 0, io.EOF
		case err == nil:
			return n, nil
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			return 0, &os.PathError{Op: "read", Path: "|0", Err: err}
		}
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}, {Fd: int32(r.stop), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return 0, &os.PathError{Op: "poll", Path: "|0", Err: err}
		}
	}
}

// Stop makes a waiting Read, and every later one, return ErrStopped.
func (r *Reader) Stop() {
	r.stopped.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.signaled || r.closed {
		return
	}
	r.signaled = true
	var one = [8]byte{1}
	unix.Write(r.stop, one[:])
}

// Close releases the pipe; it is called once, after the last Read.
func (r *Reader) Close() error {
	r.mu.Lock()
	r.closed = true
	unix.Close(r.stop)
	r.mu.Unlock()
	return unix.Close(r.fd)
}
