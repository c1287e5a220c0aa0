// Package adminapi is the JSON plumbing of the admin APIs boxctl serves on
// unix sockets (the credential broker's, the egress gates'): strict
// request bodies, JSON answers, and the one error shape their clients
// read.
package adminapi

import (
	"encoding/json"
	"io"
	"net/http"
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
