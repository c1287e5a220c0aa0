package vendorhttp

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, when it returns ctx's cause: the pause
// between a vendor's polls and attempts.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
