package polltest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The back-off between two calls of a condition: the first wait, doubled
// after each call up to the longest.
const (
	firstWait   = 10 * time.Millisecond
	longestWait = 200 * time.Millisecond
)

// errNotYet is what Until's condition returns while it does not hold.
var errNotYet = errors.New("not yet")

// Until calls cond until it returns true, and fails t with "timed out
// after timeout waiting for what" if it does not within timeout.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilNil(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilNil calls cond until it returns nil, and fails t if it does not
// within timeout, naming what and the last error cond returned.
func UntilNil(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	ctx := t.Context()
	err := poll(ctx, timeout, cond)
	last := ""
	if err != nil && err != errNotYet {
		last = ": " + err.Error()
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		t.Fatalf("stopped waiting for %s: %v%s", what, context.Cause(ctx), last)
	default:
		t.Fatalf("timed out after %v waiting for %s%s", timeout, what, last)
	}
}

// poll calls cond with the back-off until it returns nil, timeout passes
// or ctx ends, and returns cond's last error.
func poll(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	wait := firstWait
	for {
		err := cond()
		left := time.Until(deadline)
		if err == nil || left <= 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(wait, left)):
		}
		wait = min(2*wait, longestWait)
	}
}
