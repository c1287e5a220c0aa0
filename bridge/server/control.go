package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// inputQueue counts the inputs that wait for each session's run.
type inputQueue struct {
	mu      sync.Mutex
	waiting map[string]int
}

var (
	errQueueFull    = errors.New("the session's input queue is full")
	errQueueTimeout = errors.New("the session's run did not end in time")
)

// enter takes a place in session id's queue, or fails with errQueueFull;
// leave gives it back.
func (q *inputQueue) enter(id string, depth int) (leave func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waiting == nil {
		q.waiting = map[string]int{}
	}
	if q.waiting[id] >= depth {
		return nil, errQueueFull
	}
	q.waiting[id]++
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.waiting[id]--; q.waiting[id] <= 0 {
			delete(q.waiting, id)
		}
	}, nil
}

// admitQueued admits a turn once the session has no live run, waiting at
// most Options.InputQueueTimeout. A turn admitted before (the same turn
// id and request) is answered at once, as /turns answers it.
func (s *Server) admitQueued(ctx context.Context, tr engine.TurnRequest) (store.Run, error) {
	leave, err := s.queue.enter(tr.Turn.SessionID, s.opts.InputQueueDepth)
	if err != nil {
		return store.Run{}, err
	}
	defer leave()
	ctx, cancel := context.WithTimeout(ctx, s.opts.InputQueueTimeout)
	defer cancel()
	for {
		_, run, _, err := s.opts.Engine.AdmitTurn(ctx, tr)
		if err != nil && ctx.Err() != nil {
			return store.Run{}, errQueueTimeout
		}
		if !errors.Is(err, engine.ErrSessionBusy) {
			return run, err
		}
		turns, terr := s.opts.Engine.Store().Turns(ctx, tr.Turn.SessionID, 0)
		if terr == nil && len(turns) > 0 {
			s.opts.Engine.Wait(ctx, turns[len(turns)-1].RunID)
		}
		if ctx.Err() != nil {
			return store.Run{}, errQueueTimeout
		}
	}
}

// steerSession answers POST /v1/sessions/:id/steer: the message goes to
// the harness of the session's live run, named exactly by the request.
// The acknowledgement is stored under the operation id (which cancel
// operations share): the operation repeated gets it again, another
// request under the same id is a conflict.
func (s *Server) steerSession(w http.ResponseWriter, r *http.Request) {
	rs, body, ok := s.sessionAndBody(w, r)
	if !ok {
		return
	}
	var req wire.SteerRequest
	if _, err := decodeStrict(body, &req); err != nil || wire.ValidIdentifier(req.OperationID) != nil ||
		strings.TrimSpace(req.Message) == "" || req.Run.RunID == "" || req.Run.SessionID == "" || req.Run.ExecutionID == "" ||
		req.Run.RequestDigest == "" {
		writeError(w, wire.TypeInvalidRequest,
			"steer requires operationId, message, and an exact run reference with sessionId, executionId, and requestDigest")
		return
	}
	ack := wire.ControlAck{OperationID: req.OperationID, Kind: wire.ControlKindSteer, SessionID: rs.ID, RunID: req.Run.RunID}
	no := false
	digest, err := wire.Digest(map[string]any{"kind": wire.ControlKindSteer, "sessionId": rs.ID, "run": req.Run, "prompt": req.Message})
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	st := s.opts.Engine.Store()
	prev, bound, err := store.Bound(st.GetCancellation(r.Context(), req.OperationID))
	if err != nil {
		s.writeFailure(w, wire.Fault("load operation", fmt.Errorf("operation %s: %w", req.OperationID, err)))
		return
	}
	if bound {
		s.answerStoredControl(w, prev, digest, ack)
		return
	}
	run, err := st.GetRun(r.Context(), req.Run.RunID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.writeRunLookupError(w, req.Run.RunID, err)
		return
	}
	if err != nil || req.Run.SessionID != rs.ID || run.SessionID != rs.ID || run.ExecutionID != req.Run.ExecutionID ||
		run.Digest != req.Run.RequestDigest || run.Provider != req.Run.Provider || run.EnvironmentID != req.Run.EnvironmentID {
		ack.Status, ack.Message, ack.Retryable = wire.ControlConflict, "run reference is not the durable admission for this session", &no
		writeJSON(w, http.StatusConflict, ack)
		return
	}
	status := http.StatusOK
	switch err := s.opts.Engine.Steer(run.ID, req.Message); {
	case err == nil:
		ack.Status = wire.ControlAccepted
	case errors.Is(err, engine.ErrNotLive):
		ack.Status, ack.Message, ack.Retryable, status = wire.ControlUnknownRun, "active run is unknown", &no, http.StatusNotFound
	case errors.Is(err, engine.ErrNotSteerable):
		ack.Status, ack.Message, ack.Retryable, status = wire.ControlCapabilityDenied, rs.Harness+" takes no input while a turn runs",
			&no, http.StatusNotImplemented
	default:
		ack.Status, ack.Message, ack.Retryable, status = wire.ControlEffectUnknown, err.Error(), &no, http.StatusBadGateway
	}
	c, _, err := st.PutCancellation(r.Context(), store.Cancellation{OperationID: req.OperationID, Digest: digest,
		HTTPStatus: status, Body: wire.MustJSON(ack)})
	if err != nil {
		s.log.Error("store steer", "operation", req.OperationID, "err", err)
		writeError(w, wire.TypeServerError, "store steer")
		return
	}
	s.answerStoredControl(w, c, digest, ack)
}

// answerStoredControl answers a stored control operation: as stored when
// its digest is the request's, a conflict otherwise.
func (s *Server) answerStoredControl(w http.ResponseWriter, c store.Cancellation, digest string, ack wire.ControlAck) {
	if c.Digest != digest {
		no := false
		ack.Status, ack.Retryable = wire.ControlConflict, &no
		ack.Message = "operation id was already used with a different caller or request"
		writeJSON(w, http.StatusConflict, ack)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.HTTPStatus)
	w.Write(c.Body)
}

// detachSession answers POST /v1/sessions/:id/detach. Nothing of the
// session stops: a reader detaches by closing its stream, and the run and
// its events stay for any reader to come.
func (s *Server) detachSession(w http.ResponseWriter, r *http.Request) {
	rs, ok := s.sessionOr404(w, r)
	if !ok {
		return
	}
	v, err := s.view(r.Context(), rs)
	if err != nil {
		s.log.Error("load session view", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	writeJSON(w, http.StatusOK, wire.SessionDetach{Detached: true, Session: v})
}

// deleteSession answers DELETE /v1/sessions/:id: it forgets the harness
// session a chat session id resumes (?backend= names one harness). A
// retained session's own is not touched: it is closed with /close.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := wire.ValidIdentifier(id); err != nil {
		writeError(w, wire.TypeInvalidRequest, "session id "+err.Error())
		return
	}
	st := s.opts.Engine.Store()
	if _, err := st.GetSession(r.Context(), id); err == nil {
		writeError(w, wire.TypeSessionConflict, "session "+id+" is a retained session; close it with POST /v1/sessions/"+id+"/close")
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		s.log.Error("load session", "session", id, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	deleted, err := st.DeleteNativeSession(r.Context(), id, r.URL.Query().Get("backend"))
	if err != nil {
		s.log.Error("delete session", "session", id, "err", err)
		writeError(w, wire.TypeServerError, "delete session")
		return
	}
	writeJSON(w, http.StatusOK, wire.SessionDelete{Deleted: deleted})
}

// transcript answers GET /v1/sessions/:id/transcript: the retained events
// of the session's runs, folded as the TypeScript bridge folds them.
func (s *Server) transcript(w http.ResponseWriter, r *http.Request) {
	rs, ok := s.sessionOr404(w, r)
	if !ok {
		return
	}
	out, err := s.foldTranscript(r.Context(), rs.ID)
	if err != nil {
		s.log.Error("read transcript", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "read transcript")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) foldTranscript(ctx context.Context, id string) (wire.Transcript, error) {
	out := wire.Transcript{SessionID: id, Messages: []wire.TranscriptMessage{}, Interactions: []json.RawMessage{},
		Usage: []json.RawMessage{}}
	st := s.opts.Engine.Store()
	turns, err := st.Turns(ctx, id, 0)
	if err != nil {
		return out, err
	}
	index := map[string]int{} // message id -> index in out.Messages
	for _, t := range turns {
		err := st.EachEvent(ctx, t.RunID, 0, math.MaxInt, func(seq int64, data []byte) bool {
			out.EventCount++
			last := strconv.FormatInt(t.Offset+seq, 10)
			out.LastEventID = &last
			foldEvent(&out, index, data)
			return true
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return out, err
		}
	}
	return out, nil
}

// foldEvent adds one envelope's event to a transcript: a part update to
// its message (replacing the part's earlier state), an interaction's
// request, a usage report.
func foldEvent(out *wire.Transcript, index map[string]int, data []byte) {
	var env wire.Envelope
	var ev struct {
		Type string `json:"type"`
		Part *struct {
			ID        string `json:"id"`
			MessageID string `json:"messageID"`
		} `json:"part"`
		Request json.RawMessage `json:"request"`
		Event   json.RawMessage `json:"event"`
	}
	if json.Unmarshal(data, &env) != nil || json.Unmarshal(env.Event, &ev) != nil {
		return
	}
	switch ev.Type {
	case wire.EventMessagePartUpdated:
		if ev.Part == nil {
			return
		}
		var part struct {
			Part json.RawMessage `json:"part"`
		}
		json.Unmarshal(env.Event, &part)
		i, ok := index[ev.Part.MessageID]
		if !ok {
			i = len(out.Messages)
			index[ev.Part.MessageID] = i
			out.Messages = append(out.Messages, wire.TranscriptMessage{ID: ev.Part.MessageID, Role: "assistant"})
		}
		m := &out.Messages[i]
		for j, p := range m.Parts {
			var pid struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(p, &pid) == nil && pid.ID == ev.Part.ID {
				m.Parts[j] = part.Part
				return
			}
		}
		m.Parts = append(m.Parts, part.Part)
	case wire.EventInteraction:
		if len(ev.Request) > 0 {
			out.Interactions = append(out.Interactions, ev.Request)
		}
	case wire.EventRaw:
		var payload struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(ev.Event, &payload) == nil && payload.Type == wire.UsagePayloadType {
			out.Usage = append(out.Usage, ev.Event)
		}
	}
}
