package daytona

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// SnapshotAPIError is a non-success answer of Daytona's snapshot and
// registry API, from its error body {path, timestamp, statusCode, error,
// message}. Callers test for it with errors.As and branch on Status.
type SnapshotAPIError struct {
	// Status is the HTTP status code.
	Status int
	// Err is the body's error (the status text, e.g. "Not Found").
	Err string
	// Message is the body's message, or the raw body if it was not JSON.
	Message string
	// Path is the request path the server reports.
	Path string
	// RetryAfter is the longest Retry-After(-*) header, zero if absent.
	RetryAfter time.Duration
}

func (e *SnapshotAPIError) Error() string {
	s := fmt.Sprintf("daytona: %d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func newAPIError(resp *http.Response) *SnapshotAPIError {
	e := &SnapshotAPIError{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Path    string          `json:"path"`
		Error   string          `json:"error"`
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(b, &body) == nil && (body.Error != "" || len(body.Message) > 0) {
		e.Path, e.Err = body.Path, body.Error
		// message is a string, or a list of strings for validation errors.
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
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	e.RetryAfter, _ = retryAfter(resp)
	return e
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
