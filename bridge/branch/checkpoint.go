package branch

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Checkpoint copies the workspace of the ended run req.Source names, and
// answers the checkpoint: created, replayed, conflict, or unknown (and
// retryable) while the run is live.
func (m *Manager) Checkpoint(ctx context.Context, req wire.CheckpointRequest) (wire.CheckpointResult, error) {
	key, digest := req.IdempotencyKey, req.RequestDigest
	o, done, err := begin[wire.CheckpointRef](ctx, m, store.KindCheckpoint, key, digest, checkCheckpoint(req))
	if err != nil || done {
		return checkpointResult(key, digest, o), err
	}
	run, err := m.opts.Store.GetRun(ctx, req.Source.RunID)
	if errors.Is(err, store.ErrNotFound) || err == nil && !runMatches(run, req.Source) {
		return wire.CheckpointResult{}, notFound("no run " + req.Source.RunID + " with these coordinates")
	}
	if err != nil {
		return wire.CheckpointResult{}, wire.Fault("load run", err)
	}
	if !run.Terminal() {
		return wire.CheckpointResult{Status: wire.BranchUnknown, IdempotencyKey: key, RequestDigest: digest,
			Message: "run " + run.ID + " is live; checkpoint it after it ends", Retryable: ptr(true)}, nil
	}
	src, err := m.workspaceOf(ctx, run)
	if err != nil {
		return wire.CheckpointResult{}, wire.Fault("find workspace", err)
	}
	o, err = makeCopy(ctx, m, "ckpt_", copyOf[wire.CheckpointRef]{src: src, what: "workspace", skip: []string{m.opts.Dir},
		res: store.Resource{Kind: store.KindCheckpoint, IdempotencyKey: key, RequestDigest: digest, Provider: req.Source.Provider},
		ref: func(id string, at time.Time) wire.CheckpointRef {
			return wire.CheckpointRef{CheckpointID: id, Provider: req.Source.Provider, Source: req.Source,
				IdempotencyKey: key, RequestDigest: digest, CreatedAt: rfc3339(at), Metadata: req.Metadata}
		}})
	return checkpointResult(key, digest, o), err
}

// checkCheckpoint checks a checkpoint request's fields and digest.
func checkCheckpoint(req wire.CheckpointRequest) error {
	if err := wire.ValidKeyed(req.IdempotencyKey, req.RequestDigest); err != nil {
		return invalid(err.Error())
	}
	if err := wire.ValidRunRef(req.Source); err != nil {
		return invalid("source: " + err.Error())
	}
	if !wire.ValidObject(req.Metadata) {
		return invalid("metadata must be an object")
	}
	if err := wire.CheckDigest(req.RequestDigest, req.Material(), "checkpoint"); err != nil {
		return invalid(err.Error())
	}
	return nil
}

// LookupCheckpoint answers the lookup of a checkpoint's key: found, not
// found, or conflict.
func (m *Manager) LookupCheckpoint(ctx context.Context, req wire.OperationLookup) (wire.CheckpointResult, error) {
	o, err := lookup[wire.CheckpointRef](ctx, m.opts.Store, store.KindCheckpoint, req)
	return checkpointResult(req.IdempotencyKey, req.RequestDigest, o), err
}

func checkpointResult(key, digest string, o outcome[wire.CheckpointRef]) wire.CheckpointResult {
	return wire.CheckpointResult{Status: o.status, IdempotencyKey: key, RequestDigest: digest, Checkpoint: o.ref,
		ExistingRequestDigest: o.existing, Message: o.message, Retryable: o.retryable}
}

// runMatches says whether a stored run is the one ref names.
func runMatches(run store.Run, ref wire.RunRef) bool {
	return run.Digest == ref.RequestDigest && run.SessionID == ref.SessionID &&
		(run.Provider == "" || run.Provider == ref.Provider) &&
		(run.EnvironmentID == "" || run.EnvironmentID == ref.EnvironmentID) &&
		(run.ExecutionID == "" || run.ExecutionID == ref.ExecutionID)
}

// workspaceOf is the directory the run worked in.
func (m *Manager) workspaceOf(ctx context.Context, run store.Run) (string, error) {
	rs, err := m.opts.Store.GetSession(ctx, run.SessionID)
	if err == nil {
		var create wire.SessionCreateRequest
		if json.Unmarshal(rs.Request, &create) == nil && create.Cwd != nil {
			return *create.Cwd, nil
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	return os.Getwd()
}
