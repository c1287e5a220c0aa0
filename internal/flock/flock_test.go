package flock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestLock: a second lock of the file waits for the first's release, and
// a wait ends with its context.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.lock")
	unlock, err := Lock(t.Context(), path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, path, 0o600); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second lock while the first is held = %v, want the context's deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := Lock(t.Context(), path, 0o600)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("the lock after the release = %v", err)
	}
}
