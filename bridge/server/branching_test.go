package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// postJSON posts v as JSON and decodes the answer into T.
func postJSON[T any](t *testing.T, v *env, path string, body any) (int, T) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp := v.do(t, "POST", path, string(b))
	return resp.StatusCode, decode[T](t, resp)
}

// digested sets the request digest of a request with a Material method.
func digested(t *testing.T, material any) string {
	t.Helper()
	d, err := wire.Digest(material)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// endedRun runs one turn of a new session whose cwd is dir and returns
// the run's exact reference.
func endedRun(t *testing.T, v *env, session, dir string) wire.RunRef {
	t.Helper()
	createSession(t, v, session, fmt.Sprintf(`,"cwd":%q`, dir))
	adm := postTurn(t, v, session, turnBody("t1", "run-"+session, "hello"))
	if s := waitRun(t, v, adm.Run.ID); s.Status != wire.StatusDone {
		t.Fatalf("run %s = %s, want done", adm.Run.ID, s.Status)
	}
	return wire.RunRef{RunID: adm.Run.ID, Provider: "test", EnvironmentID: "env-1", SessionID: session,
		ExecutionID: "exec-t1", RequestDigest: adm.Run.RequestDigest}
}

// TestWorkspaceBranching follows a checkpoint and a fork of it through
// their life, as the agent interface's workspace branching contract
// states it: keyed creation with replay and conflict, lookup, cleanup in
// dependency order, confirmed and repeated cleanup, and lookups after it.
func TestWorkspaceBranching(t *testing.T) {
	v := newEnv(t, config{})
	// The workspace is the test's directory, which holds the bridge's data
	// directory too: a copy leaves that out.
	if err := os.WriteFile(filepath.Join(v.dir, "a.txt"), []byte("before"), 0o640); err != nil {
		t.Fatal(err)
	}
	src := endedRun(t, v, "s-branch", v.dir)

	ck := wire.CheckpointRequest{Source: src, Name: "ck", Metadata: json.RawMessage(`{"branchId":"b1"}`), IdempotencyKey: "ck-1"}
	ck.RequestDigest = digested(t, ck.Material())
	code, created := postJSON[wire.CheckpointResult](t, v, "/v1/workspace/checkpoints", ck)
	if code != http.StatusCreated || created.Status != wire.BranchCreated || created.Checkpoint == nil ||
		created.Checkpoint.Provider != "test" || created.Checkpoint.RequestDigest != ck.RequestDigest ||
		string(created.Checkpoint.Metadata) != `{"branchId":"b1"}` {
		t.Fatalf("checkpoint = %d %+v", code, created)
	}
	// Written after the checkpoint: a fork of it must not have it.
	if err := os.WriteFile(filepath.Join(v.dir, "b.txt"), []byte("after"), 0o640); err != nil {
		t.Fatal(err)
	}
	changed := ck
	changed.Name = "ck-changed"
	changed.RequestDigest = digested(t, changed.Material())
	badDigest := ck
	badDigest.RequestDigest = changed.RequestDigest
	otherRun := ck
	otherRun.IdempotencyKey, otherRun.Source.RunID = "ck-2", "run-nope"
	otherRun.RequestDigest = digested(t, otherRun.Material())
	lookup := wire.OperationLookup{IdempotencyKey: ck.IdempotencyKey, RequestDigest: ck.RequestDigest}
	for _, tt := range []struct {
		name, path string
		body       any
		wantCode   int
		want       wire.CheckpointResult
	}{
		{"replay", "/v1/workspace/checkpoints", ck, 200,
			wire.CheckpointResult{Status: wire.BranchReplayed, IdempotencyKey: "ck-1", RequestDigest: ck.RequestDigest, Checkpoint: created.Checkpoint}},
		{"lookup", "/v1/workspace/checkpoints/lookup", lookup, 200,
			wire.CheckpointResult{Status: wire.BranchFound, IdempotencyKey: "ck-1", RequestDigest: ck.RequestDigest, Checkpoint: created.Checkpoint}},
		{"changed request, same key", "/v1/workspace/checkpoints", changed, 409,
			wire.CheckpointResult{Status: wire.BranchConflict, IdempotencyKey: "ck-1", RequestDigest: changed.RequestDigest,
				ExistingRequestDigest: ck.RequestDigest}},
		{"unknown key", "/v1/workspace/checkpoints/lookup", wire.OperationLookup{IdempotencyKey: "nope", RequestDigest: ck.RequestDigest}, 200,
			wire.CheckpointResult{Status: wire.BranchNotFound, IdempotencyKey: "nope", RequestDigest: ck.RequestDigest}},
	} {
		t.Run("checkpoint "+tt.name, func(t *testing.T) {
			code, got := postJSON[wire.CheckpointResult](t, v, tt.path, tt.body)
			if diff := cmp.Diff(tt.want, got); code != tt.wantCode || diff != "" {
				t.Errorf("POST %s = %d, want %d; (-want +got):\n%s", tt.path, code, tt.wantCode, diff)
			}
		})
	}
	for _, tt := range []struct {
		name     string
		body     any
		wantCode int
	}{{"wrong digest", badDigest, 400}, {"unknown run", otherRun, 404}} {
		t.Run("checkpoint "+tt.name, func(t *testing.T) {
			if code, e := postJSON[wire.ErrorResponse](t, v, "/v1/workspace/checkpoints", tt.body); code != tt.wantCode {
				t.Errorf("POST checkpoint = %d %+v, want %d", code, e.Error, tt.wantCode)
			}
		})
	}

	fk := wire.ForkRequest{Checkpoint: *created.Checkpoint, Name: "fk", Placement: wire.Placement{Kind: "local"}, IdempotencyKey: "fk-1"}
	fk.RequestDigest = digested(t, fk.Material())
	code, forked := postJSON[wire.ForkResult](t, v, "/v1/workspace/forks", fk)
	if code != http.StatusCreated || forked.Status != wire.BranchCreated || forked.Environment == nil ||
		forked.Environment.SourceEnvironmentID != "env-1" || forked.Environment.EnvironmentID == "env-1" ||
		forked.Environment.SourceCheckpointID != created.Checkpoint.CheckpointID {
		t.Fatalf("fork = %d %+v", code, forked)
	}
	forkID := forked.Environment.EnvironmentID
	fkChanged := fk
	fkChanged.Name = "fk-changed"
	fkChanged.RequestDigest = digested(t, fkChanged.Material())
	for _, tt := range []struct {
		name, path string
		body       any
		wantCode   int
		want       wire.ForkResult
	}{
		{"replay", "/v1/workspace/forks", fk, 200,
			wire.ForkResult{Status: wire.BranchReplayed, IdempotencyKey: "fk-1", RequestDigest: fk.RequestDigest, Environment: forked.Environment}},
		{"lookup", "/v1/workspace/forks/lookup", wire.OperationLookup{IdempotencyKey: "fk-1", RequestDigest: fk.RequestDigest}, 200,
			wire.ForkResult{Status: wire.BranchFound, IdempotencyKey: "fk-1", RequestDigest: fk.RequestDigest, Environment: forked.Environment}},
		{"changed request, same key", "/v1/workspace/forks", fkChanged, 409,
			wire.ForkResult{Status: wire.BranchConflict, IdempotencyKey: "fk-1", RequestDigest: fkChanged.RequestDigest,
				ExistingRequestDigest: fk.RequestDigest}},
	} {
		t.Run("fork "+tt.name, func(t *testing.T) {
			code, got := postJSON[wire.ForkResult](t, v, tt.path, tt.body)
			if diff := cmp.Diff(tt.want, got); code != tt.wantCode || diff != "" {
				t.Errorf("POST %s = %d, want %d; (-want +got):\n%s", tt.path, code, tt.wantCode, diff)
			}
		})
	}
	ws := decode[wire.ForkWorkspace](t, v.do(t, "GET", "/v1/workspace/forks/"+forkID, ""))
	t.Run("fork workspace is the checkpoint's copy", func(t *testing.T) {
		var names []string
		entries, _ := os.ReadDir(ws.Path)
		for _, e := range entries {
			names = append(names, e.Name())
		}
		a, err := os.ReadFile(filepath.Join(ws.Path, "a.txt"))
		if err != nil || string(a) != "before" || slices.Contains(names, "b.txt") || slices.Contains(names, "data") {
			t.Errorf("fork workspace %s holds %v (a.txt %q, %v), want a.txt \"before\" and neither b.txt nor data", ws.Path, names, a, err)
		}
	})

	cleanup := func(kind, target, op string) wire.CleanupRequest {
		c := wire.CleanupRequest{OperationID: op, Kind: kind, TargetID: target, Provider: "test"}
		c.RequestDigest = digested(t, c.Material())
		return c
	}
	ckClean := cleanup(wire.CleanupKindCkpt, created.Checkpoint.CheckpointID, "ck-1-cleanup")
	fkClean := cleanup(wire.CleanupKindFork, forkID, "fk-1-cleanup")
	steps := []struct {
		name, path string
		body       wire.CleanupRequest
		wantCode   int
		wantStatus string
		wantExtra  func(wire.CleanupAck) bool
	}{
		{"checkpoint in use", "/v1/workspace/checkpoints/delete", ckClean, 409, wire.CleanupInUse,
			func(a wire.CleanupAck) bool {
				return slices.Equal(a.BlockingTargetIDs, []string{forkID}) && a.Message != ""
			}},
		{"fork destroyed", "/v1/workspace/forks/destroy", fkClean, 200, wire.CleanupDeleted, nil},
		{"fork destroyed again", "/v1/workspace/forks/destroy", fkClean, 200, wire.CleanupAlreadyAbsent, nil},
		{"fork cleanup changed", "/v1/workspace/forks/destroy", cleanup(wire.CleanupKindFork, "other", "fk-1-cleanup"), 409, wire.CleanupConflict,
			func(a wire.CleanupAck) bool { return a.ExistingRequestDigest == fkClean.RequestDigest }},
		{"checkpoint deleted", "/v1/workspace/checkpoints/delete", ckClean, 200, wire.CleanupDeleted, nil},
		{"checkpoint deleted again", "/v1/workspace/checkpoints/delete", ckClean, 200, wire.CleanupAlreadyAbsent, nil},
		{"checkpoint cleanup changed", "/v1/workspace/checkpoints/delete", cleanup(wire.CleanupKindCkpt, "other", "ck-1-cleanup"), 409,
			wire.CleanupConflict, func(a wire.CleanupAck) bool { return a.ExistingRequestDigest == ckClean.RequestDigest }},
	}
	for _, tt := range steps {
		t.Run("cleanup "+tt.name, func(t *testing.T) {
			code, a := postJSON[wire.CleanupAck](t, v, tt.path, tt.body)
			if code != tt.wantCode || a.Status != tt.wantStatus || a.OperationID != tt.body.OperationID || a.TargetID != tt.body.TargetID ||
				a.RequestDigest != tt.body.RequestDigest || tt.wantExtra != nil && !tt.wantExtra(a) {
				t.Errorf("POST %s = %d %+v, want %d %s", tt.path, code, a, tt.wantCode, tt.wantStatus)
			}
		})
	}
	t.Run("after cleanup", func(t *testing.T) {
		if _, err := os.Stat(ws.Path); !os.IsNotExist(err) {
			t.Errorf("fork workspace %s after its destroy: %v, want it gone", ws.Path, err)
		}
		_, c := postJSON[wire.CheckpointResult](t, v, "/v1/workspace/checkpoints/lookup", lookup)
		_, f := postJSON[wire.ForkResult](t, v, "/v1/workspace/forks/lookup", wire.OperationLookup{IdempotencyKey: "fk-1", RequestDigest: fk.RequestDigest})
		if c.Status != wire.BranchNotFound || f.Status != wire.BranchNotFound {
			t.Errorf("lookups after cleanup = %s, %s, want not_found twice", c.Status, f.Status)
		}
		if resp := v.do(t, "GET", "/v1/workspace/forks/"+forkID, ""); resp.StatusCode != 404 {
			t.Errorf("GET destroyed fork = %d, want 404", resp.StatusCode)
		}
	})
}
