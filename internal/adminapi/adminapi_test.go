package adminapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCall: a success decodes, a refusal is a *StatusError with its body,
// and a body with an unknown field is refused by Decode.
func TestCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ N int }
		if !Decode(w, r, &in) {
			return
		}
		Write(w, http.StatusOK, map[string]int{"n": in.N + 1})
	}))
	defer srv.Close()
	var out struct{ N int }
	if err := Call(t.Context(), srv.Client(), http.MethodPost, srv.URL, map[string]int{"N": 1}, &out); err != nil || out.N != 2 {
		t.Fatalf("Call = %v, %+v; want n 2", err, out)
	}
	err := Call(t.Context(), srv.Client(), http.MethodPost, srv.URL, map[string]int{"X": 1}, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusBadRequest || se.Body.Type != "invalid_body" {
		t.Fatalf("Call with an unknown field = %v, want 400 invalid_body", err)
	}
}
