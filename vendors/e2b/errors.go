package e2b

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
)

// APIError is a non-success answer of E2B's control plane or of a
// sandbox's envd, with E2B's error body {code, message, error_code?}:
// Code holds error_code. Callers test for it with errors.As.
type APIError = vendorhttp.APIError

// mapErr turns a control plane error into the typed errors of package
// vendors: 404 is *vendors.NotFoundError (when id names a box), 429 a
// *vendors.RateLimitError; others are wrapped with the operation.
func (v *Vendor) mapErr(op, id string, err error) error {
	var ae *vendorhttp.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("e2b: %s: %w", op, err)
	}
	switch {
	case ae.Status == http.StatusNotFound && id != "":
		return fmt.Errorf("e2b: %s: %w (%s)", op, &vendors.NotFoundError{Vendor: Name, ID: id}, ae.Message)
	case ae.Status == http.StatusTooManyRequests:
		return &vendors.RateLimitError{Vendor: Name, Op: op, RetryAfter: ae.RetryAfter, Message: ae.Message,
			Quota: strings.Contains(strings.ToLower(ae.Message), "concurrent")}
	}
	return fmt.Errorf("e2b: %s: %w", op, err)
}

func isStatus(err error, status int) bool {
	var ae *vendorhttp.APIError
	return errors.As(err, &ae) && ae.Status == status
}
