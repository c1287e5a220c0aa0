package branch

import (
	"context"
	"errors"
	"os"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Cleanup deletes a checkpoint or destroys a fork (kind, which the
// request must name too). The operation id is bound to its target first,
// so a repeat of it confirms the target absent and a changed request under
// it is a conflict; a checkpoint that forks were made from is in use
// until they are destroyed.
func (m *Manager) Cleanup(ctx context.Context, kind string, req wire.CleanupRequest) (wire.CleanupAck, error) {
	for _, f := range []struct{ name, v string }{{"operationId", req.OperationID}, {"targetId", req.TargetID}, {"provider", req.Provider}} {
		if err := wire.ValidIdentifier(f.v); err != nil {
			return wire.CleanupAck{}, invalid(f.name + " " + err.Error())
		}
	}
	if req.Kind != kind {
		return wire.CleanupAck{}, invalid("kind must be " + kind + " on this route")
	}
	if err := wire.CheckDigest(req.RequestDigest, req.Material(), "cleanup"); err != nil {
		return wire.CleanupAck{}, invalid(err.Error())
	}
	ack := wire.CleanupAck{OperationID: req.OperationID, Kind: req.Kind, TargetID: req.TargetID, Provider: req.Provider,
		RequestDigest: req.RequestDigest}
	st := m.opts.Store
	bound, err := st.BindCleanup(ctx, req.OperationID, kind, req.RequestDigest)
	if errors.Is(err, store.ErrCleanupConflict) {
		ack.Status, ack.ExistingRequestDigest = wire.CleanupConflict, bound
		ack.Message = "operation " + req.OperationID + " is bound to a different cleanup"
		return ack, nil
	}
	if err != nil {
		return wire.CleanupAck{}, wire.Fault("bind cleanup", err)
	}
	got, err := st.ResourceByID(ctx, kind, req.TargetID)
	if errors.Is(err, store.ErrNotFound) || err == nil && (got.Provider != req.Provider || !got.DeletedAt.IsZero()) {
		ack.Status = wire.CleanupAlreadyAbsent
		return ack, nil
	}
	if err != nil {
		return wire.CleanupAck{}, wire.Fault("load "+kind, err)
	}
	deleted, blocking, err := st.DeleteResource(ctx, kind, req.TargetID)
	switch {
	case errors.Is(err, store.ErrInUse):
		ack.Status, ack.BlockingTargetIDs = wire.CleanupInUse, blocking
		ack.Message = "forks made from checkpoint " + req.TargetID + " must be destroyed first"
		return ack, nil
	case err != nil:
		return wire.CleanupAck{}, wire.Fault("delete "+kind, err)
	}
	ack.Status = wire.CleanupAlreadyAbsent
	if deleted {
		ack.Status = wire.CleanupDeleted
		if err := os.RemoveAll(got.Path); err != nil {
			m.log.Error("remove workspace copy", "kind", kind, "id", got.ID, "err", err)
		}
	}
	return ack, nil
}
