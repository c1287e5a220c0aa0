package continuation

import (
	"encoding/json"
	"reflect"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// check is the admission check of a continuation of session id, run in
// the transaction that admits it: the session is open and its context
// boundary is the expected one. A refusal is recorded under the
// operation id (Final) when it is definite: the session moved on.
func (r request) check(id string) func(cur store.RetainedSession) *store.Rejection {
	reject := func(o wire.ContinuationOutcome, final bool) *store.Rejection {
		return &store.Rejection{HTTPStatus: HTTPStatus(o.Acknowledgement.Status), Body: wire.MustJSON(o), Final: final}
	}
	return func(cur store.RetainedSession) *store.Rejection {
		if !cur.ClosedAt.IsZero() {
			return reject(r.outcome(wire.ContinuationConflict, "session "+id+" is closed", new(bool)), false)
		}
		var actual wire.BoundaryProof
		if cur.Boundary != nil && json.Unmarshal(cur.Boundary, &actual) == nil && sameBoundary(actual, r.ExpectedBoundary) {
			return nil
		}
		// As the TypeScript bridge answers: a session with no boundary
		// cannot be verified; one that moved on to another run is bound
		// to another request (conflict); one whose boundary changed within
		// the run is a mismatch that shows the boundary it has.
		switch {
		case cur.Boundary == nil || json.Unmarshal(cur.Boundary, &actual) != nil:
			return reject(r.outcome(wire.ContinuationUnverified, "the session has no verified context boundary: no turn was admitted", new(bool)), false)
		case !bindsRun(actual, r.Run):
			o := r.outcome(wire.ContinuationConflict, "the session moved on to run "+actual.RunID, new(bool))
			o.Acknowledgement.ExistingRequestDigest = differentDigest(r.RequestDigest, actual.RequestDigest)
			return reject(o, true)
		}
		o := r.outcome(wire.ContinuationBoundaryMismatch, "the session's context boundary is not the expected one", new(bool))
		o.Acknowledgement.ActualBoundary = &actual
		return reject(o, true)
	}
}

// sameBoundary reports whether two boundary proofs name the same
// conversation state of the same run; when each was observed does not
// matter.
func sameBoundary(a, b wire.BoundaryProof) bool {
	a.ObservedAt, b.ObservedAt = "", ""
	return reflect.DeepEqual(a, b)
}

// bindsRun reports whether a boundary proof belongs to run.
func bindsRun(p wire.BoundaryProof, run wire.RunRef) bool {
	return p.RunID == run.RunID && p.Provider == run.Provider && p.EnvironmentID == run.EnvironmentID &&
		p.SessionID == run.SessionID && p.ExecutionID == run.ExecutionID && p.RequestDigest == run.RequestDigest
}

// differentDigest is existing, or a digest derived from it when it equals
// the request's own (a conflict must name another request).
func differentDigest(request, existing string) string {
	if existing != request && wire.ValidDigest(existing) == nil {
		return existing
	}
	d, _ := wire.Digest(map[string]string{"existing": existing, "request": "different"})
	return d
}
