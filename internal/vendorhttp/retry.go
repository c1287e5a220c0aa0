package vendorhttp

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"time"
)

// backoff waits as long as the server asked, up to max; else min*2^attempt
// up to max, with up to a quarter of jitter so that concurrent callers
// spread out.
func (c *Client) backoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	if d, ok := c.cfg.RetryAfter(resp); ok {
		return minDuration(d, max)
	}
	d := min
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	d = minDuration(d, max)
	if q := int64(d / 4); q > 0 {
		d += time.Duration(rand.Int64N(q))
	}
	return minDuration(d, max)
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// neverConnected reports an error from before any byte reached a server:
// a refused or failed dial.
func neverConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isTimeout reports an error of a deadline that ran out: the HTTP
// client's Timeout or a network deadline.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
