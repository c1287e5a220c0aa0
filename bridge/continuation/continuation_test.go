package continuation

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestHTTPStatus(t *testing.T) {
	tests := map[string]int{
		wire.ContinuationAccepted: http.StatusOK, wire.ContinuationReplayed: http.StatusOK,
		wire.ContinuationConflict: http.StatusConflict, wire.ContinuationBoundaryMismatch: http.StatusConflict,
		wire.ContinuationUnverified: http.StatusUnprocessableEntity, wire.ContinuationUnknownSession: http.StatusNotFound,
		wire.ContinuationTransportFailure: http.StatusServiceUnavailable,
	}
	for status, want := range tests {
		if got := HTTPStatus(status); got != want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", status, got, want)
		}
	}
}

// TestCheck: the admission check of a continuation against the session
// as the admitting transaction sees it.
func TestCheck(t *testing.T) {
	run := wire.RunRef{RunID: "r1", Provider: "p", EnvironmentID: "e", SessionID: "s", ExecutionID: "x",
		RequestDigest: "sha256:aa"}
	expected := wire.BoundaryProof{RunID: "r1", Provider: "p", EnvironmentID: "e", SessionID: "s", ExecutionID: "x",
		RequestDigest: "sha256:aa", Boundary: wire.ContextBoundary{Kind: "revision", Revision: "1"}, ObservedAt: "t1"}
	req := request{wire.ContinuationRequest{OperationID: "op", RequestDigest: "sha256:bb", Run: run, ExpectedBoundary: expected}}
	boundary := func(p wire.BoundaryProof) []byte { b, _ := json.Marshal(p); return b }
	moved, changed, later := expected, expected, expected
	moved.RunID, moved.RequestDigest = "r2", "sha256:cc"
	changed.Boundary.Revision = "2"
	later.ObservedAt = "t2"
	tests := []struct {
		name   string
		cur    store.RetainedSession
		status string // "": admitted
		final  bool
	}{
		{"expected boundary", store.RetainedSession{Boundary: boundary(expected)}, "", false},
		{"observed later", store.RetainedSession{Boundary: boundary(later)}, "", false},
		{"no boundary", store.RetainedSession{}, wire.ContinuationUnverified, false},
		{"moved on", store.RetainedSession{Boundary: boundary(moved)}, wire.ContinuationConflict, true},
		{"changed within the run", store.RetainedSession{Boundary: boundary(changed)}, wire.ContinuationBoundaryMismatch, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rej := req.check("s")(tc.cur)
			if tc.status == "" {
				if rej != nil {
					t.Fatalf("check = %d %s, want admitted", rej.HTTPStatus, rej.Body)
				}
				return
			}
			var o wire.ContinuationOutcome
			if rej == nil || json.Unmarshal(rej.Body, &o) != nil {
				t.Fatalf("check = %+v, want a %s refusal", rej, tc.status)
			}
			if o.Acknowledgement.Status != tc.status || rej.Final != tc.final || rej.HTTPStatus != HTTPStatus(tc.status) {
				t.Errorf("check = %d final %v %+v, want %s final %v", rej.HTTPStatus, rej.Final, o.Acknowledgement, tc.status, tc.final)
			}
		})
	}
}

func TestReplayed(t *testing.T) {
	accepted := wire.MustJSON(wire.ContinuationOutcome{Acknowledgement: wire.ContinuationAck{Status: wire.ContinuationAccepted}})
	var o wire.ContinuationOutcome
	if json.Unmarshal(replayed(accepted, true), &o); o.Acknowledgement.Status != wire.ContinuationReplayed {
		t.Errorf("replayed(accepted, repeat) = %s, want replayed", o.Acknowledgement.Status)
	}
	if got := replayed(accepted, false); string(got) != string(accepted) {
		t.Errorf("replayed(accepted, first) = %s, want it as recorded", got)
	}
}

func TestDifferentDigest(t *testing.T) {
	if got := differentDigest("sha256:r", "x"); wire.ValidDigest(got) != nil {
		t.Errorf("differentDigest of a malformed digest = %q, want a digest", got)
	}
	d := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	if got := differentDigest("sha256:other", d); got != d {
		t.Errorf("differentDigest(other, %s) = %s, want it as is", d, got)
	}
	if got := differentDigest(d, d); got == d || wire.ValidDigest(got) != nil {
		t.Errorf("differentDigest(d, d) = %s, want another digest", got)
	}
}
