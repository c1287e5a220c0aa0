package polltest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
)

// recorder is a test that notes what it failed with.
type recorder struct {
	testing.TB
	ctx    context.Context
	failed string
}

func (r *recorder) Helper()                  {}
func (r *recorder) Context() context.Context { return r.ctx }

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run runs f on a goroutine of its own, as the testing package runs a
// test, and returns what it failed with.
func run(t *testing.T, ctx context.Context, f func(testing.TB)) string {
	r := &recorder{TB: t, ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

func TestUntil(t *testing.T) {
	tests := []struct {
		name       string
		holdsAt    int // the call at which cond first holds; 0 for never
		wantCalls  int
		wantTook   time.Duration
		wantFailed string
	}{
		{"holds at once", 1, 1, 0, ""},
		// Waits of 10, 20, 40 and 80ms.
		{"holds on the fifth call", 5, 5, 150 * time.Millisecond, ""},
		// Calls at 0, 10, 30, 70, 150, 310, 510, 710, 910 and 1000ms.
		{"never holds", 0, 10, time.Second, "timed out after 1s waiting for the thing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				start := time.Now()
				failed := run(t, t.Context(), func(tb testing.TB) {
					polltest.Until(tb, time.Second, "the thing", func() bool {
						calls++
						return calls == tt.holdsAt
					})
				})
				if took := time.Since(start); calls != tt.wantCalls || took != tt.wantTook || failed != tt.wantFailed {
					t.Errorf("Until() = %q after %d calls and %v, want %q after %d and %v", failed, calls, took, tt.wantFailed, tt.wantCalls, tt.wantTook)
				}
			})
		})
	}
}

func TestUntilNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		failed := run(t, t.Context(), func(tb testing.TB) {
			polltest.UntilNil(tb, 100*time.Millisecond, "the file", func() error {
				calls++
				return fmt.Errorf("call %d: %w", calls, errors.ErrUnsupported)
			})
		})
		// Calls at 0, 10, 30, 70 and 100ms.
		if want := "timed out after 100ms waiting for the file: call 5: unsupported operation"; failed != want {
			t.Errorf("UntilNil() = %q, want %q", failed, want)
		}
		if failed := run(t, t.Context(), func(tb testing.TB) {
			polltest.UntilNil(tb, time.Second, "the file", func() error { return nil })
		}); failed != "" {
			t.Errorf("UntilNil() of a condition that holds = %q, want no failure", failed)
		}
	})
}

// TestUntil_contextEnds: the wait stops when the test's context ends.
func TestUntil_contextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		failed := run(t, ctx, func(tb testing.TB) {
			polltest.Until(tb, time.Hour, "the thing", func() bool { return false })
		})
		if took, want := time.Since(start), "stopped waiting for the thing: context canceled"; failed != want || took != time.Second {
			t.Errorf("Until() = %q after %v, want %q after 1s", failed, took, want)
		}
	})
}
