package vendorhttp_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := vendorhttp.Sleep(t.Context(), time.Minute); err != nil || time.Since(start) != time.Minute {
			t.Errorf("Sleep(1m) = %v after %v, want nil after 1m", err, time.Since(start))
		}
		stop := errors.New("stop")
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(stop) })
		start = time.Now()
		if err := vendorhttp.Sleep(ctx, time.Hour); !errors.Is(err, stop) || time.Since(start) != time.Second {
			t.Errorf("Sleep(1h) cancelled after 1s = %v after %v, want the cause after 1s", err, time.Since(start))
		}
	})
}
