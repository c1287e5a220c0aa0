package e2b

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// TemplateAPIError is a non-success answer of E2B's template API, from its
// error body {code, message, error_code?}. Callers test for it with
// errors.As and branch on Status.
type TemplateAPIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the body's code (usually equal to Status).
	Code int
	// ErrorCode is the body's machine-readable error_code, if any.
	ErrorCode string
	// Message is the body's message, or the raw body if it was not JSON.
	Message string
	// RetryAfter is the server's Retry-After, zero if absent.
	RetryAfter time.Duration
}

func (e *TemplateAPIError) Error() string {
	s := fmt.Sprintf("e2b: %d %s", e.Status, http.StatusText(e.Status))
	if e.ErrorCode != "" {
		s += " (" + e.ErrorCode + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func newTemplateAPIError(resp *http.Response) *TemplateAPIError {
	e := &TemplateAPIError{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		ErrorCode string `json:"error_code"`
	}
	if json.Unmarshal(b, &body) == nil && (body.Code != 0 || body.Message != "") {
		e.Code, e.Message, e.ErrorCode = body.Code, body.Message, body.ErrorCode
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// TemplateBuildError reports a template build that E2B finished with status
// "error".
type TemplateBuildError struct {
	TemplateID string
	BuildID    string
	// Message is the reason E2B gave; Step the build step that failed.
	Message string
	Step    string
}

func (e *TemplateBuildError) Error() string {
	s := fmt.Sprintf("e2b template %s build %s failed", e.TemplateID, e.BuildID)
	if e.Step != "" {
		s += " at step " + e.Step
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}
