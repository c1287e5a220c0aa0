package jssdk

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// TestLockFile holds the lock while a second taker waits: the taker gives
// up when its context ends, and takes the lock within its back-off of the
// release.
func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "set.lock")
	synctest.Test(t, func(t *testing.T) {
		unlock, err := lockFile(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := lockFile(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lockFile of a held lock = %v, want the context's deadline", err)
		}
		taken := make(chan time.Time, 1)
		go func() {
			defer func() { taken <- time.Now() }()
			u, err := lockFile(t.Context(), path)
			if err != nil {
				t.Errorf("lockFile after the release = %v", err)
				return
			}
			u()
		}()
		time.Sleep(time.Minute) // the taker polls the held lock, its back-off at its longest
		released := time.Now()
		unlock()
		if waited := (<-taken).Sub(released); waited > 20*time.Millisecond {
			t.Errorf("lockFile took the released lock %v after its release, want at most 20ms", waited)
		}
	})
}
