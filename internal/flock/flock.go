// Package flock takes exclusive flock(2) locks of files shared between
// processes, waiting under a context: the one loop the box state, the
// pool files and the JavaScript SDK installs share.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Lock takes the exclusive flock of the file at path (created with perm
// when missing), polling so that ctx can end the wait, and returns its
// release. The wait between tries grows from 1 ms to 20 ms, so that a lock
// held for a short update is taken soon after its release; a try a signal
// interrupted (EINTR) is tried again.
func Lock(ctx context.Context, path string, perm os.FileMode) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	wait := time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, context.Cause(ctx))
		case <-timer.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}
