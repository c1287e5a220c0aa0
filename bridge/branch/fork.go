package branch

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Fork copies the live checkpoint req.Checkpoint names into a new
// workspace on this machine, and answers the forked environment: created,
// replayed or conflict.
func (m *Manager) Fork(ctx context.Context, req wire.ForkRequest) (wire.ForkResult, error) {
	key, digest := req.IdempotencyKey, req.RequestDigest
	o, done, err := begin[wire.ForkedEnvironment](ctx, m, store.KindFork, key, digest, checkFork(req))
	if err != nil || done {
		return forkResult(key, digest, o), err
	}
	ckpt, err := m.opts.Store.ResourceByID(ctx, store.KindCheckpoint, req.Checkpoint.CheckpointID)
	if err == nil && (!ckpt.DeletedAt.IsZero() || !sameJSON(ckpt.Ref, req.Checkpoint)) {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return wire.ForkResult{}, notFound("no live checkpoint " + req.Checkpoint.CheckpointID + " as the request gives it")
	}
	if err != nil {
		return wire.ForkResult{}, wire.Fault("load checkpoint", err)
	}
	o, err = makeCopy(ctx, m, "fork_", copyOf[wire.ForkedEnvironment]{src: ckpt.Path, what: "checkpoint",
		res: store.Resource{Kind: store.KindFork, IdempotencyKey: key, RequestDigest: digest, ParentID: ckpt.ID,
			Provider: req.Checkpoint.Provider},
		ref: func(id string, at time.Time) wire.ForkedEnvironment {
			return wire.ForkedEnvironment{Provider: req.Checkpoint.Provider, EnvironmentID: id,
				SourceEnvironmentID: req.Checkpoint.Source.EnvironmentID, Source: req.Checkpoint.Source,
				SourceCheckpointID: ckpt.ID, IdempotencyKey: key, RequestDigest: digest, CreatedAt: rfc3339(at),
				Placement: req.Placement, Metadata: req.Metadata}
		}})
	return forkResult(key, digest, o), err
}

// checkFork checks a fork request's fields and digest, and that it asks
// for what the bridge gives: no confidential execution, a local placement.
func checkFork(req wire.ForkRequest) error {
	if err := wire.ValidKeyed(req.IdempotencyKey, req.RequestDigest); err != nil {
		return invalid(err.Error())
	}
	if !wire.ValidObject(req.Metadata) || !wire.ValidObject(req.Confidential) || !wire.ValidObject(req.Placement.ProviderMetadata) {
		return invalid("metadata, confidential and placement.providerMetadata must be objects")
	}
	if err := wire.CheckDigest(req.RequestDigest, req.Material(), "fork"); err != nil {
		return invalid(err.Error())
	}
	var conf struct {
		Requested bool `json:"requested"`
	}
	if len(req.Confidential) > 0 && json.Unmarshal(req.Confidential, &conf) == nil && conf.Requested {
		return &wire.ErrorBody{Type: wire.TypeCapabilityDenied, Message: "the bridge attests no confidential execution"}
	}
	if req.Placement.Kind != "local" {
		return invalid(`a fork is placed on the bridge's own machine: placement.kind must be "local"`)
	}
	return nil
}

// LookupFork answers the lookup of a fork's key: found, not found, or
// conflict.
func (m *Manager) LookupFork(ctx context.Context, req wire.OperationLookup) (wire.ForkResult, error) {
	o, err := lookup[wire.ForkedEnvironment](ctx, m.opts.Store, store.KindFork, req)
	return forkResult(req.IdempotencyKey, req.RequestDigest, o), err
}

func forkResult(key, digest string, o outcome[wire.ForkedEnvironment]) wire.ForkResult {
	return wire.ForkResult{Status: o.status, IdempotencyKey: key, RequestDigest: digest, Environment: o.ref,
		ExistingRequestDigest: o.existing, Message: o.message, Retryable: o.retryable}
}

// Workspace returns a live fork and the path of its workspace.
func (m *Manager) Workspace(ctx context.Context, id string) (wire.ForkWorkspace, error) {
	got, err := m.opts.Store.ResourceByID(ctx, store.KindFork, id)
	if err == nil && !got.DeletedAt.IsZero() {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return wire.ForkWorkspace{}, notFound("no live fork " + id)
	}
	if err != nil {
		return wire.ForkWorkspace{}, wire.Fault("load fork", err)
	}
	out := wire.ForkWorkspace{Path: got.Path}
	if err := json.Unmarshal(got.Ref, &out.Environment); err != nil {
		return wire.ForkWorkspace{}, wire.Fault("decode fork", err)
	}
	return out, nil
}
