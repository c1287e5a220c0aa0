package cancellation

import (
	"errors"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestCheck(t *testing.T) {
	ref := wire.RunRef{RunID: "r1", Provider: "p", EnvironmentID: "e", SessionID: "s", ExecutionID: "x",
		RequestDigest: "sha256:" + strings.Repeat("a", 64)}
	signed := func(req wire.CancellationRequest) wire.CancellationRequest {
		d, err := wire.CancellationDigest(req)
		if err != nil {
			t.Fatal(err)
		}
		req.RequestDigest = d
		return req
	}
	for _, tc := range []struct {
		name string
		req  wire.CancellationRequest
		err  string // part of the refusal; "" for none
	}{
		{"exact", signed(wire.CancellationRequest{OperationID: "op", Run: ref, Reason: "done"}), ""},
		{"empty", wire.CancellationRequest{}, "operationId"},
		{"no run", signed(wire.CancellationRequest{OperationID: "op"}), "run.runId"},
		{"no run request digest", signed(wire.CancellationRequest{OperationID: "op", Run: wire.RunRef{RunID: "r1", Provider: "p",
			EnvironmentID: "e", SessionID: "s", ExecutionID: "x"}}), "run.requestDigest"},
		{"no request digest", wire.CancellationRequest{OperationID: "op", Run: ref}, "requestDigest is required"},
		{"the digest of another request", func() wire.CancellationRequest {
			r := signed(wire.CancellationRequest{OperationID: "op", Run: ref})
			r.Reason = "changed after signing"
			return r
		}(), "does not match"},
		{"a reason too long", signed(wire.CancellationRequest{OperationID: "op", Run: ref, Reason: strings.Repeat("x", wire.MaxCancellationReason+1)}),
			"reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Check(tc.req)
			if tc.err == "" {
				if err != nil || d != tc.req.RequestDigest {
					t.Errorf("Check(%+v) = %q, %v, want its digest %q", tc.req, d, err, tc.req.RequestDigest)
				}
				return
			}
			var e *wire.ErrorBody
			if !errors.As(err, &e) || e.Type != wire.TypeInvalidRequest || !strings.Contains(e.Message, tc.err) {
				t.Errorf("Check(%+v) = %q, %v, want an %s about %q", tc.req, d, err, wire.TypeInvalidRequest, tc.err)
			}
		})
	}
}
