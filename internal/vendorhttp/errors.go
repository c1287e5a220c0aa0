package vendorhttp

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// APIError is a non-success answer of a vendor's API. Callers test for it
// with errors.As and branch on Status (vendor clients map it to the typed
// errors of package vendors).
type APIError struct {
	// Vendor names the vendor ("e2b").
	Vendor string
	// Method and Path are the request's (a Config.DecodeError may set
	// Path as the server reports it).
	Method, Path string
	// Status is the HTTP status code.
	Status int
	// Code is the body's machine-readable code, if any (E2B's error_code,
	// Daytona's error).
	Code string
	// Message is the body's message, or the raw body if it was not the
	// vendor's error shape.
	Message string
	// RetryAfter is how long the server asked to wait; zero if it did not.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.Vendor, e.Status, http.StatusText(e.Status))
	if e.Code != "" && e.Code != http.StatusText(e.Status) {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// TimeoutError is a call whose last attempt ran out of its Call.Timeout
// while the caller's ctx still ran: the server took the request, or part
// of it, and did not answer in time.
type TimeoutError struct {
	// Vendor names the vendor ("daytona").
	Vendor string
	// Method and Path are the request's.
	Method, Path string
	// After is the bound each attempt had.
	After time.Duration
	// Err is the transport's error.
	Err error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: %s %s: no answer within %v", e.Vendor, e.Method, e.Path, e.After)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// Timeout reports true, as net.Error's Timeout does.
func (e *TimeoutError) Timeout() bool { return true }

// Temporary reports an answer worth trying again later: 429 and 5xx.
func (e *APIError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// RetryAfter reads the standard Retry-After header: delay seconds or an
// HTTP date.
func RetryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	return parseRetryAfter(resp.Header.Get("Retry-After"))
}

// RetryAfterPrefixed reads the longest wait of the headers named prefix or
// prefix-<anything> (Daytona's Retry-After-<throttler>), each seconds or
// an HTTP date.
func RetryAfterPrefixed(prefix string) func(*http.Response) (time.Duration, bool) {
	prefix = http.CanonicalHeaderKey(prefix)
	return func(resp *http.Response) (time.Duration, bool) {
		if resp == nil {
			return 0, false
		}
		var best time.Duration
		found := false
		for k, vs := range resp.Header {
			k = http.CanonicalHeaderKey(k)
			if (k != prefix && !strings.HasPrefix(k, prefix+"-")) || len(vs) == 0 {
				continue
			}
			if d, ok := parseRetryAfter(vs[0]); ok && (!found || d > best) {
				best, found = d, true
			}
		}
		return best, found
	}
}

func parseRetryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
