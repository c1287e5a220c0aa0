package daytona

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// APIError is a non-success answer of Daytona's control plane or toolbox:
// its HTTP status, the body's error (Code, e.g. "Not Found") and message,
// the path the server reports and the wait a 429 asked for. Callers test
// for it with errors.As; the box API returns the vendors' typed errors
// with it in their chain.
type APIError = vendorhttp.APIError

// decodeError reads the control plane's error body {path, timestamp,
// statusCode, error, message}: error becomes the code, path the path;
// message is a string, or a list of strings for validation errors.
func decodeError(b []byte, e *vendorhttp.APIError) bool {
	var body struct {
		Path    string          `json:"path"`
		Error   string          `json:"error"`
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(b, &body) != nil || (body.Error == "" && len(body.Message) == 0) {
		return false
	}
	e.Code = body.Error
	if body.Path != "" {
		e.Path = body.Path // the path as the server saw it
	}
	var one string
	var many []string
	switch {
	case json.Unmarshal(body.Message, &one) == nil:
		e.Message = one
	case json.Unmarshal(body.Message, &many) == nil:
		e.Message = strings.Join(many, "; ")
	default:
		e.Message = string(body.Message)
	}
	return true
}

// SnapshotFailedError reports a snapshot that ended in a failed state.
type SnapshotFailedError struct {
	Name, State, Reason string
}

func (e *SnapshotFailedError) Error() string {
	s := fmt.Sprintf("daytona snapshot %s is %s", e.Name, e.State)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}
