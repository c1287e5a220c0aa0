package daytona

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
)

// CreateError is a sandbox that ended in a failed state (error,
// build_failed) while Create waited for it, with the control plane's
// reason.
type CreateError struct {
	// ID is the sandbox's id.
	ID string
	// State is the failed state.
	State string
	// Reason is the sandbox's errorReason.
	Reason string
}

func (e *CreateError) Error() string {
	s := fmt.Sprintf("daytona: sandbox %s is %s", e.ID, e.State)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// typed turns a failed call of op (on the box id, if any) into the
// vendors' typed errors where the answer says which: 404 of a box is
// *vendors.NotFoundError, 429 and the organization's quota refusals are
// *vendors.RateLimitError. The *vendorhttp.APIError stays in the chain.
func typed(op, id string, err error) error {
	var ae *vendorhttp.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch {
	case ae.Status == http.StatusNotFound && id != "":
		return fmt.Errorf("%w (%w)", &vendors.NotFoundError{Vendor: Name, ID: id}, err)
	case ae.Status == http.StatusTooManyRequests:
		return fmt.Errorf("%w (%w)", &vendors.RateLimitError{Vendor: Name, Op: op, RetryAfter: ae.RetryAfter, Message: ae.Message}, err)
	case isQuota(ae):
		return fmt.Errorf("%w (%w)", &vendors.RateLimitError{Vendor: Name, Op: op, Quota: true, Message: ae.Message}, err)
	}
	return err
}

// isQuota reports the control plane's refusal of a create over the
// organization's total CPU, memory, disk or GPU quota (400 "Total ...
// limit exceeded").
func isQuota(ae *vendorhttp.APIError) bool {
	return (ae.Status == http.StatusBadRequest || ae.Status == http.StatusForbidden) &&
		strings.Contains(ae.Message, "Total ") && strings.Contains(ae.Message, "limit exceeded")
}

// status returns the HTTP status of a failed call, 0 if it got none.
func status(err error) int {
	var ae *vendorhttp.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}
