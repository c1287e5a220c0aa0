package provider_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
)

// TestProvider_Exec: an exec's request and answer on the wire, a refusal
// as a typed bridge error, and a bridge without the route as the not-found
// error a caller falls back on (sandbox.Environment.Exec does).
func TestProvider_Exec(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/exec", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req wire.ExecRequest
		if err := json.Unmarshal(body, &req); err != nil || r.Header.Get("Authorization") != "Bearer b" {
			t.Errorf("request %s (%v), authorization %q", body, err, r.Header.Get("Authorization"))
		}
		if req.Command[0] == "bad" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: "command: bad", Status: 400}})
			return
		}
		_ = json.NewEncoder(w).Encode(wire.ExecResult{ExitCode: 2, Stdout: []byte(req.Command[0]), Stderr: req.Stdin})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p, err := provider.New(provider.Options{BaseURL: srv.URL, BearerToken: "b"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Exec(t.Context(), wire.ExecRequest{Command: []string{"ls"}, Stdin: []byte("in")})
	if err != nil || res.ExitCode != 2 || string(res.Stdout) != "ls" || string(res.Stderr) != "in" {
		t.Errorf("Exec = %+v, %v", res, err)
	}
	var be *provider.BridgeError
	if _, err := p.Exec(t.Context(), wire.ExecRequest{Command: []string{"bad"}}); !errors.As(err, &be) || be.Type != wire.TypeInvalidRequest {
		t.Errorf("a refused exec = %v, want a *BridgeError of type %s", err, wire.TypeInvalidRequest)
	}
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeNotFound, Message: "no route", Status: 404}})
	}))
	defer old.Close()
	op, err := provider.New(provider.Options{BaseURL: old.URL, BearerToken: "b"})
	if err != nil {
		t.Fatal(err)
	}
	var nf *provider.NotFoundError
	if _, err := op.Exec(t.Context(), wire.ExecRequest{Command: []string{"ls"}}); !errors.As(err, &nf) {
		t.Errorf("exec on a bridge without the route = %v, want a *NotFoundError", err)
	}
}
