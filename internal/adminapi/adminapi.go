// Package adminapi is the JSON plumbing of the admin APIs boxctl serves on
// unix sockets (the credential broker's, the egress gates'): strict
// request bodies, JSON answers, and the one error shape their clients
// read.
package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// MaxBody bounds a request body.
const MaxBody = 1 << 20

// Error is the body of every answer that is not a success.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Decode reads r's JSON body into v, refusing unknown fields and bodies
// over MaxBody; on failure it answers 400 invalid_body and reports false.
func Decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		Write(w, http.StatusBadRequest, Error{Type: "invalid_body", Message: err.Error()})
		return false
	}
	return true
}

// Write answers status with v as JSON.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// UnixClient is an HTTP client of the admin API on the unix socket at
// path (any host in a request's URL reaches it).
func UnixClient(path string) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// StatusError is an answer that is not a success, with its body.
type StatusError struct {
	Status int
	Body   Error
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Body.Type, e.Body.Message)
}

// Call sends in (when not nil) as JSON to url and decodes a success's
// body into out (when not nil). An answer of 300 or more is a
// *StatusError; a transport failure is returned as it is.
func Call(ctx context.Context, hc *http.Client, method, url string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		se := &StatusError{Status: resp.StatusCode}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&se.Body)
		return se
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, MaxBody)).Decode(out)
}
