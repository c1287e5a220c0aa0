package vendors

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotFound means the box does not exist (or no longer does).
var ErrNotFound = errors.New("box not found")

// ErrGone means the box vanished while an operation was running in it.
var ErrGone = errors.New("box gone mid-run")

// ErrUnsupported is matched by every *UnsupportedError, and by the
// provider's refusal of an operation an environment does not support: it
// is the standard library's errors.ErrUnsupported, the one sentinel of
// both, which the provider (it does not import this package) returns as
// it is.
var ErrUnsupported = errors.ErrUnsupported

// ErrRateLimited is matched by every *RateLimitError.
var ErrRateLimited = errors.New("vendor rate limit")

// ErrNoHostAddress is the error of a vendor's HostAddress when it was
// given no address of this machine that its boxes reach (a cloud's boxes
// reach none by themselves).
var ErrNoHostAddress = errors.New("no host address for the boxes to reach this machine")

// NotFoundError is a box that does not exist. It matches ErrNotFound.
type NotFoundError struct {
	Vendor, ID string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s: box %s not found", e.Vendor, e.ID)
}

// Is reports ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// NotFound returns err as a *NotFoundError of vendor's box id, err's text
// after it, when id is set and notFound reports err as the API's "no such
// object"; any other err, nil included, it returns as it is.
func NotFound(vendor, id string, err error, notFound func(error) bool) error {
	if err == nil || id == "" || !notFound(err) {
		return err
	}
	return fmt.Errorf("%w: %v", &NotFoundError{Vendor: vendor, ID: id}, err)
}

// GoneError is a box that vanished while Op was running in it. It matches
// ErrGone and ErrNotFound.
type GoneError struct {
	Vendor, ID, Op string
	Err            error
}

func (e *GoneError) Error() string {
	msg := fmt.Sprintf("%s: box %s vanished during %s", e.Vendor, e.ID, e.Op)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *GoneError) Unwrap() error { return e.Err }

// Is reports ErrGone and ErrNotFound.
func (e *GoneError) Is(target error) bool { return target == ErrGone || target == ErrNotFound }

// RateLimitError is a request the vendor throttled (or refused over a
// quota). It matches ErrRateLimited.
type RateLimitError struct {
	Vendor, Op string
	// Quota is set when a quota (not a rate) was exceeded: waiting alone
	// may not help.
	Quota bool
	// RetryAfter is the wait the vendor asked for; zero when it named
	// none.
	RetryAfter time.Duration
	Message    string
}

func (e *RateLimitError) Error() string {
	kind := "rate limited"
	if e.Quota {
		kind = "over quota"
	}
	msg := fmt.Sprintf("%s: %s: %s", e.Vendor, e.Op, kind)
	if e.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is reports ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// UnsupportedError is a create field the vendor cannot honour. It matches
// ErrUnsupported.
type UnsupportedError struct {
	Vendor string
	Field  Field
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("%s cannot honour the create field %s", e.Vendor, e.Field)
}

// Is reports ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// SpecError is a create spec that is invalid whatever the vendor.
type SpecError struct {
	Vendor string
	Err    error
}

func (e *SpecError) Error() string { return "invalid box spec for " + e.Vendor + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *SpecError) Unwrap() error { return e.Err }

// CleanupError is a failure after a box was created that could not be
// cleaned up: the box BoxID may still exist and is the caller's to remove
// (Connect it, then Destroy). Err is the original failure joined with the
// failed destroy.
type CleanupError struct {
	Vendor string
	BoxID  string
	Err    error
}

func (e *CleanupError) Error() string {
	return fmt.Sprintf("%v (box %s on %s was not removed: destroy it by id)", e.Err, e.BoxID, e.Vendor)
}

// Unwrap returns the cause.
func (e *CleanupError) Unwrap() error { return e.Err }
