package vendors

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// cleanupTimeout bounds the removal of what a failed Create made.
const cleanupTimeout = time.Minute

// CreateToken returns a token unique to one Create call, for the box's
// boxmeta.LabelCreate: lowercase letters and digits, 26 of them.
func CreateToken() string { return strings.ToLower(rand.Text()) }

// Discard ends a box that Create made but could not finish (cause is why:
// it did not start, say): it destroys the box on a context of its own, so
// that a cancelled ctx still removes it, and returns cause, or a
// *CleanupError naming the box when the destroy failed too.
func Discard(ctx context.Context, vendor, id string, destroy func(context.Context) error, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := destroy(cctx); err != nil {
		return &CleanupError{Vendor: vendor, BoxID: id, Err: errors.Join(cause, err)}
	}
	return cause
}

// IdempotentCreate is the create of a box on a control plane whose answer
// may be lost after it made the box (a server error, a cut connection):
// every attempt carries one create token (CreateToken, in the box's
// labels), the boxes carrying it are looked up before any attempt after an
// unsure one, a box found so is kept and any other with the token (a late
// duplicate) destroyed, and a create given up removes every box with the
// token. A create cut short by its context is looked for a while longer
// (Landing), since the control plane finishes a request it had after the
// caller went. So a retry never leaves a second box, and a failed Create
// leaves none, or names it in a *CleanupError.
type IdempotentCreate[B any] struct {
	// Vendor is the vendor's name, for errors.
	Vendor string
	// Attempts bounds the calls of Create. Default: 3.
	Attempts int
	// Backoff is the pause before the n-th attempt after an unsure one:
	// n times Backoff. Default: 500ms.
	Backoff time.Duration
	// Create asks the control plane for the box once, with the token.
	// Its errors are returned as they are (in a *CleanupError's chain when
	// a box was left behind).
	Create func(ctx context.Context) (B, error)
	// Unsure reports whether a failed Create may have made the box all
	// the same. A failure that is not unsure made nothing.
	Unsure func(err error) bool
	// Find returns the boxes carrying the token, made by any attempt.
	Find func(ctx context.Context) ([]B, error)
	// Adopt turns a box Find returned into what Create returns (for
	// control planes whose listing lacks what a create answers); nil
	// means the found box as it is.
	Adopt func(ctx context.Context, found B) (B, error)
	// ID returns a box's id.
	ID func(B) string
	// Destroy removes the box id; one already gone is not an error.
	Destroy func(ctx context.Context, id string) error
}

// Run creates the box; see IdempotentCreate.
func (c IdempotentCreate[B]) Run(ctx context.Context) (B, error) {
	var zero B
	attempts, backoff := c.Attempts, c.Backoff
	if attempts <= 0 {
		attempts = 3
	}
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	unsure := false // an attempt may have made a box
	var last error
	for attempt := 0; attempt < attempts; attempt++ {
		if unsure {
			found, err := c.Find(ctx)
			if err != nil {
				return zero, c.abandon(ctx, errors.Join(last, err))
			}
			if len(found) > 0 {
				return c.keep(ctx, found[0], found, true)
			}
			if err := vendorhttp.Sleep(ctx, time.Duration(attempt)*backoff); err != nil {
				return zero, c.abandon(ctx, errors.Join(last, err))
			}
		}
		b, err := c.Create(ctx)
		if err == nil {
			if !unsure {
				return b, nil
			}
			// An earlier attempt may have made one after all.
			found, err := c.Find(ctx)
			if err != nil {
				return zero, c.abandon(ctx, err)
			}
			return c.keep(ctx, b, found, false)
		}
		last = err
		switch {
		case ctx.Err() != nil:
			// The call was cut short, maybe in flight: the control plane
			// may finish it after the caller went.
			return zero, c.settle(ctx, fmt.Errorf("%w (%w)", context.Cause(ctx), err))
		case !c.Unsure(err):
			if unsure {
				return zero, c.abandon(ctx, err)
			}
			return zero, err
		}
		unsure = true
	}
	if found, err := c.Find(ctx); err == nil && len(found) > 0 {
		return c.keep(ctx, found[0], found, true)
	}
	return zero, c.abandon(ctx, last)
}

// keep keeps box b of the token and destroys every other of all; adopt
// says b was found, not answered by Create.
func (c IdempotentCreate[B]) keep(ctx context.Context, b B, all []B, adopt bool) (B, error) {
	var zero B
	id := c.ID(b)
	for _, d := range all {
		if did := c.ID(d); did != id {
			if err := c.Destroy(ctx, did); err != nil {
				return zero, &CleanupError{Vendor: c.Vendor, BoxID: did, Err: fmt.Errorf("%s: destroy a duplicate of box %s: %w", c.Vendor, id, err)}
			}
		}
	}
	if !adopt || c.Adopt == nil {
		return b, nil
	}
	got, err := c.Adopt(ctx, b)
	if err != nil {
		return zero, c.abandon(ctx, err)
	}
	return got, nil
}

// abandon destroys every box with the token after a failed create, on a
// context of its own; a box it cannot destroy makes the error a
// *CleanupError.
func (c IdempotentCreate[B]) abandon(ctx context.Context, cause error) error {
	return c.sweep(ctx, cause, 0)
}

// Landing is how long a create cut short by its context is looked for
// after: a control plane (or engine) that had the request finishes it all
// the same, and the box it makes must not be left behind.
const Landing = 5 * time.Second

// settle is abandon for a create cut short by its context: it looks for
// the box again, at growing intervals, until Landing has passed with none.
func (c IdempotentCreate[B]) settle(ctx context.Context, cause error) error {
	return c.sweep(ctx, cause, Landing)
}

// sweep destroys the boxes of the token, looking for them until one is
// found or for up to wait.
func (c IdempotentCreate[B]) sweep(ctx context.Context, cause error, wait time.Duration) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+wait)
	defer cancel()
	err := Landed(cctx, wait, func(ctx context.Context) (bool, error) {
		found, err := c.Find(ctx)
		if err != nil {
			return false, errors.Join(cause, fmt.Errorf("%s: look for a box the failed create made: %w", c.Vendor, err))
		}
		for _, b := range found {
			if err := c.Destroy(ctx, c.ID(b)); err != nil {
				return false, &CleanupError{Vendor: c.Vendor, BoxID: c.ID(b), Err: errors.Join(cause, err)}
			}
		}
		return len(found) > 0, nil
	})
	if err != nil {
		return err
	}
	return cause
}

// Landed calls try until it reports done or fails, again at growing
// intervals for up to wait (once when wait is 0): the look-up, after a
// create cut short, for a box the control plane may still make (wait
// Landing). It returns try's error; ctx ending only stops the looking.
func Landed(ctx context.Context, wait time.Duration, try func(context.Context) (bool, error)) error {
	end, pause := time.Now().Add(wait), 100*time.Millisecond
	for {
		done, err := try(ctx)
		if err != nil || done || !time.Now().Before(end) {
			return err
		}
		if vendorhttp.Sleep(ctx, min(pause, time.Until(end))) != nil {
			return nil
		}
		pause *= 2
	}
}
