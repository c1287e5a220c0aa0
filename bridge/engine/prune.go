package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
)

// Prune applies the store's time-based retention. It first closes the
// retained sessions idle for the store's SessionIdle
// (store.CloseIdleSessions) and ends what still serves them, as closing
// one through CloseSession does; then it runs store.Prune and removes the
// harness state directories of the sessions the store forgot, and
// checkpoints the store (store.Checkpoint). The bridge calls it
// periodically.
func (e *Engine) Prune(ctx context.Context) error {
	closed, err := e.store.CloseIdleSessions(ctx)
	for _, id := range closed {
		e.log.Debug("closing idle session", "session", id)
		e.sessionClosed(id)
	}
	if err != nil {
		return err
	}
	st, err := e.store.Prune(ctx)
	removed := e.removeSessionDirs(st.Forgotten)
	if cerr := e.store.Checkpoint(ctx); cerr != nil {
		e.log.Warn("checkpoint", "err", cerr)
	}
	if !st.Empty() || len(closed) > 0 {
		e.log.Debug("pruned", "sessions_closed", len(closed), "replay_expired", st.ReplayExpired, "runs", st.Runs,
			"turns", st.Turns, "interactions", st.Interactions, "interaction_ops", st.InteractionOps,
			"continuations", st.Continuations, "cancellations", st.Cancellations, "sessions", st.Sessions,
			"native_sessions_forgotten", len(st.Forgotten), "state_dirs_removed", removed)
	}
	return err
}

// removeSessionDirs removes the state directories of forgotten sessions
// and returns how many it removed. A session that has a live run, or that
// was created again and already has a native session, keeps its
// directory. The directory is renamed under the engine's lock, which
// admissions take before a run creates it, and removed after.
func (e *Engine) removeSessionDirs(refs []store.SessionRef) int {
	var trash []string
	pruned := 0
	e.mu.Lock()
	for _, ref := range refs {
		busy := false
		for _, l := range e.live {
			busy = busy || (l.sessionID == ref.ID && l.harness == ref.Harness)
		}
		if busy {
			continue
		}
		if _, err := e.store.NativeSession(context.Background(), ref.ID, ref.Harness); err == nil {
			continue
		}
		dir := e.sessionDirPath(ref.Harness, ref.ID)
		if target, err := os.Readlink(dir); err == nil {
			trash = append(trash, target) // the state a spare started (spare.go)
		}
		gone := fmt.Sprintf("%s.pruned-%d", dir, time.Now().UnixNano())
		if err := os.Rename(dir, gone); err == nil {
			trash = append(trash, gone)
			pruned++
		} else if !errors.Is(err, os.ErrNotExist) {
			e.log.Warn("remove session state", "session", ref.ID, "err", err)
		}
	}
	e.mu.Unlock()
	for _, d := range trash {
		if err := os.RemoveAll(d); err != nil {
			e.log.Warn("remove session state", "dir", d, "err", err)
		}
	}
	return pruned
}
