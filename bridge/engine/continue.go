package engine

import (
	"context"
	"errors"

	"github.com/tangle-network/boxctl/bridge/store"
)

// AdmitContinuation admits the turn of a native continuation (operation
// c) and starts its run, like AdmitTurn, but only if check accepts the
// session as it is when the turn is stored: the check, the turn, its run
// and the record of c are one store transaction, taken under the engine's
// admission lock, so no other turn can move the session's context
// boundary in between.
//
// It returns the recorded continuation with store.ErrContinuationExists
// when the operation id was recorded before (by this call's twin, say),
// store.ErrContinuationRejected with the outcome when check rejected it,
// and otherwise AdmitTurn's errors (ErrSessionBusy, ErrSaturated,
// ErrTurnConflict, ErrNotRetained, ErrClosed, store.ErrNotFound for an
// unknown session).
func (e *Engine) AdmitContinuation(ctx context.Context, req TurnRequest, c store.Continuation,
	check func(store.RetainedSession) *store.Rejection) (store.Continuation, store.Run, error) {
	recorded := c
	req.Admit = func(ctx context.Context, t store.Turn, r store.Run, boundary func(store.Turn) []byte) (store.Turn, store.Run, bool, error) {
		got, t, r, err := e.store.AdmitContinuation(ctx, c, check, t, r, boundary)
		recorded = got
		return t, r, err == nil, err
	}
	_, run, created, err := e.AdmitTurn(ctx, req)
	if err != nil {
		return recorded, run, err
	}
	if !created {
		// The turn was admitted before under this operation's turn id:
		// the operation is recorded.
		got, gerr := e.store.GetContinuation(ctx, c.OperationID)
		if errors.Is(gerr, store.ErrNotFound) {
			return c, run, ErrTurnConflict // a turn of another request holds the turn id
		}
		if gerr != nil {
			return got, run, gerr
		}
		return got, run, store.ErrContinuationExists
	}
	return recorded, run, nil
}
