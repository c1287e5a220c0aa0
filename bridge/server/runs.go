package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

func msPtr(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// loadRun reads a run and the engine's live view of it, consistently: a
// run the store says is running is live in the engine unless it ended in
// between, in which case it is read again.
func (s *Server) loadRun(ctx context.Context, id string) (store.Run, wire.RunSnapshot, error) {
	st := s.opts.Engine.Store()
	for attempt := 0; ; attempt++ {
		r, err := st.GetRun(ctx, id)
		if err != nil {
			return store.Run{}, wire.RunSnapshot{}, err
		}
		readers, cancelling, live := s.opts.Engine.Live(id)
		if r.Terminal() || live || attempt > 0 {
			snap := s.snapshot(r, readers, cancelling, live)
			if snap.Harness, err = st.RunHarness(ctx, id); err != nil {
				return store.Run{}, wire.RunSnapshot{}, err
			}
			return r, snap, nil
		}
	}
}

func (s *Server) snapshot(r store.Run, readers int, cancelling, live bool) wire.RunSnapshot {
	opts := s.opts.Engine.Store().Options()
	snap := wire.RunSnapshot{
		ID: r.ID, RequestDigest: r.Digest, Status: r.Status, Terminal: r.Terminal(),
		AttachedReaders: readers, CancelRequestedAt: msPtr(r.CancelRequestedAt), LastSeq: r.LastSeq,
		Replay: wire.ReplayWindow{
			FirstAvailableSeq: r.FirstSeq, LastSeq: r.LastSeq, RetainedDeltas: r.RetainedEvents,
			MaxRetainedDeltas: opts.MaxEvents, RetainedBytes: r.RetainedBytes, MaxRetainedBytes: opts.MaxBytes,
			ExpiresAt: msPtr(r.ReplayExpiresAt), Expired: r.ReplayExpired,
		},
		StartedAt: r.StartedAt.UnixMilli(), EndedAt: msPtr(r.EndedAt), IdentityExpiresAt: msPtr(r.IdentityExpiresAt),
		LifetimeExpiresAt: msPtr(r.LifetimeExpiresAt), Provider: r.Provider, EnvironmentID: r.EnvironmentID,
		SessionID: r.SessionID, ExecutionID: r.ExecutionID, Model: r.Model,
	}
	switch {
	case r.Terminal():
		snap.State = wire.StateTerminal
	case !live:
		snap.Status, snap.State = wire.StatusUnknown, wire.StateDetached
	case cancelling:
		snap.State = wire.StateCancelling
	case readers > 0:
		snap.State = wire.StateRunning
	default:
		snap.State = wire.StateDetached
	}
	if r.ErrType != "" {
		snap.Error = &wire.RunError{Type: r.ErrType, Message: r.ErrMessage}
	}
	return snap
}

// setRunHeaders exposes a run's identity on a response.
func setRunHeaders(w http.ResponseWriter, r store.Run) {
	h := w.Header()
	h.Set(wire.HeaderRunID, r.ID)
	h.Set(wire.HeaderRunRequestDigest, r.Digest)
	for name, v := range map[string]string{wire.HeaderRunProvider: r.Provider, wire.HeaderRunEnvironmentID: r.EnvironmentID,
		wire.HeaderRunSessionID: r.SessionID, wire.HeaderRunExecutionID: r.ExecutionID} {
		if v != "" {
			h.Set(name, v)
		}
	}
}

// setRunRefHeaders exposes an exact run reference's six coordinates, as
// every exact cancellation answer does.
func setRunRefHeaders(w http.ResponseWriter, ref wire.RunRef) {
	setRunHeaders(w, store.Run{ID: ref.RunID, Digest: ref.RequestDigest, Provider: ref.Provider,
		EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID})
}

func setSnapshotHeaders(w http.ResponseWriter, snap wire.RunSnapshot) {
	h := w.Header()
	h.Set(wire.HeaderRunStatus, snap.Status)
	h.Set(wire.HeaderRunState, snap.State)
	h.Set(wire.HeaderRunTerminal, strconv.FormatBool(snap.Terminal))
	h.Set(wire.HeaderXLastEventID, strconv.FormatInt(snap.LastSeq, 10))
}

func (s *Server) runOr404(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := wire.ValidRunID(id); err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return "", false
	}
	return id, true
}

func (s *Server) writeRunLookupError(w http.ResponseWriter, id string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, wire.TypeNotFound, "run "+id+" not found")
		return
	}
	s.log.Error("load run", "run", id, "err", err)
	writeError(w, wire.TypeServerError, "load run")
}

// waitTerminal waits up to d for a live run to end.
func (s *Server) waitTerminal(ctx context.Context, id string, d time.Duration) {
	if d <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	s.opts.Engine.Wait(ctx, id)
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id, ok := s.runOr404(w, r)
	if !ok {
		return
	}
	wait, err := parseWait(r, 0)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if _, _, err := s.loadRun(r.Context(), id); err != nil {
		s.writeRunLookupError(w, id, err)
		return
	}
	s.waitTerminal(r.Context(), id, wait)
	run, snap, err := s.loadRun(r.Context(), id)
	if err != nil {
		s.writeRunLookupError(w, id, err)
		return
	}
	setRunHeaders(w, run)
	setSnapshotHeaders(w, snap)
	writeJSON(w, http.StatusOK, snap)
}

// cursorError checks a replay cursor against a run's window.
func cursorError(r store.Run, cursor int64) *wire.ErrorBody {
	e := &wire.ErrorBody{RunID: r.ID, RequestedEventID: &cursor, FirstAvailableEventID: &r.FirstSeq, LastEventID: &r.LastSeq}
	switch {
	case cursor > r.LastSeq:
		e.Type = wire.TypeInvalidReplayCursor
		e.Message = fmt.Sprintf("replay cursor %d is ahead of the stream (last event %d)", cursor, r.LastSeq)
	case cursor < r.LastSeq && replayGone(r, cursor):
		e.Type = wire.TypeExpiredReplayCursor
		e.Message = fmt.Sprintf("replay cursor %d is older than the retained window (first available event %d)", cursor, r.FirstSeq)
	default:
		return nil
	}
	return e
}

// replayGone reports whether the events after cursor are no longer all
// retained. A run whose full replay ended with its result kept is read
// from its start (cursor 0: its folded first events, then the kept ones)
// or from within the events kept verbatim.
func replayGone(r store.Run, cursor int64) bool {
	if r.ResultKept {
		return cursor != 0 && cursor < r.LastSeq-store.KeptResultEvents
	}
	return r.ReplayExpired || cursor < r.FirstSeq-1
}

// resultCursor is where a reader from cursor starts: a run read from its
// start after its full replay ended starts at its kept result.
func resultCursor(r store.Run, cursor int64) int64 {
	if r.ResultKept && cursor < r.FirstSeq-1 {
		return r.FirstSeq - 1
	}
	return cursor
}

func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := s.runOr404(w, r)
	if !ok {
		return
	}
	cursor, err := wire.ParseCursor(r.Header.Get(wire.HeaderLastEventID), r.Header.Get(wire.HeaderXLastEventID))
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	run, snap, err := s.loadRun(r.Context(), id)
	if err != nil {
		s.writeRunLookupError(w, id, err)
		return
	}
	if e := cursorError(run, cursor); e != nil {
		writeErrorBody(w, *e)
		return
	}
	cursor = resultCursor(run, cursor)
	setRunHeaders(w, run)
	setSnapshotHeaders(w, snap)
	if s.retainedRunEvents(w, r, run, cursor) {
		return
	}
	s.stream(w, r, id, cursor)
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id, ok := s.runOr404(w, r)
	if !ok {
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	wait, err := parseWait(r, s.opts.CancelWait)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	var generic map[string]any
	if len(trimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &generic); err != nil || generic == nil {
			writeError(w, wire.TypeInvalidRequest, "cancellation body must be a JSON object")
			return
		}
	}
	if len(generic) > 0 {
		s.exactCancel(w, r, id, body, wait)
		return
	}
	if _, _, err := s.loadRun(r.Context(), id); err != nil {
		s.writeRunLookupError(w, id, err)
		return
	}
	requested, err := s.opts.Engine.Cancel(r.Context(), id)
	if err != nil {
		s.log.Error("cancel run", "run", id, "err", err)
		writeError(w, wire.TypeServerError, "cancel run")
		return
	}
	s.waitTerminal(r.Context(), id, wait)
	run, snap, err := s.loadRun(r.Context(), id)
	if err != nil {
		s.writeRunLookupError(w, id, err)
		return
	}
	setRunHeaders(w, run)
	setSnapshotHeaders(w, snap)
	resp := wire.CancelResponse{Cancelled: snap.Status == wire.StatusCancelled, CancelRequested: requested,
		Terminal: snap.Terminal, Run: snap}
	if !snap.Terminal {
		w.Header().Set(wire.HeaderRetryAfter, "1")
		writeJSON(w, http.StatusAccepted, resp)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
