package branch

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestOutcomeOf: how the resource bound to a key answers a request.
func TestOutcomeOf(t *testing.T) {
	ref, _ := json.Marshal(wire.CheckpointRef{CheckpointID: "ckpt_1"})
	live := &store.Resource{Kind: store.KindCheckpoint, ID: "ckpt_1", RequestDigest: "d1", Ref: ref}
	deleted := *live
	deleted.DeletedAt = time.Unix(1, 0)
	tests := []struct {
		name, digest, status string
		got                  *store.Resource
		want, existing       string
		ref, retryable       bool
	}{
		{"created", "d1", wire.BranchCreated, live, wire.BranchCreated, "", true, false},
		{"replayed", "d1", wire.BranchReplayed, live, wire.BranchReplayed, "", true, false},
		{"another request", "d2", wire.BranchReplayed, live, wire.BranchConflict, "d1", false, false},
		{"none", "d1", wire.BranchFound, nil, wire.BranchNotFound, "", false, false},
		{"deleted, looked up", "d1", wire.BranchFound, &deleted, wire.BranchNotFound, "", false, false},
		{"deleted, repeated", "d1", wire.BranchReplayed, &deleted, wire.BranchUnknown, "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := outcomeOf[wire.CheckpointRef](tc.digest, tc.got, tc.status)
			if err != nil {
				t.Fatal(err)
			}
			if o.status != tc.want || o.existing != tc.existing || (o.ref != nil) != tc.ref {
				t.Errorf("outcomeOf(%s) = %+v, want status %s, existing %q, a reference %v", tc.name, o, tc.want, tc.existing, tc.ref)
			}
			if tc.ref && o.ref.CheckpointID != "ckpt_1" {
				t.Errorf("outcomeOf(%s).ref = %+v, want the stored reference", tc.name, o.ref)
			}
		})
	}
}

// TestManager_NoDir: without a data directory a copy is refused, not
// configured.
func TestManager_NoDir(t *testing.T) {
	m, err := New(Options{Store: &store.Store{}})
	if err != nil {
		t.Fatal(err)
	}
	var e *wire.ErrorBody
	if err := m.CheckCopies(); !errors.As(err, &e) || wire.StatusFor(e.Type) != http.StatusNotImplemented {
		t.Errorf("CheckCopies() = %v, want a not_configured error", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without a store succeeded")
	}
}
