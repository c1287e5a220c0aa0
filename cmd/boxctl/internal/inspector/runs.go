package inspector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

var tracer = tracing.Tracer("cmd/boxctl/internal/inspector")

// MaxPrompt bounds a turn's prompt, in bytes.
const MaxPrompt = 64 << 10

// maxBody bounds a request body.
const maxBody = 1 << 20

// admitWait bounds how long POST /turns waits for the bridge to admit the
// turn (its first event, which names the run).
const admitWait = 2 * time.Minute

// turn is a turn this server started: env.Stream runs in a goroutine the
// server owns until the run ends or Close.
type turn struct {
	box     string
	runID   string
	traceID string
	started time.Time
	cancel  context.CancelFunc

	done    chan struct{}
	outcome string // set before done closes
}

// TurnRequest is the body of POST /api/boxes/{box}/turns.
type TurnRequest struct {
	Prompt string `json:"prompt"`
	// Model overrides the box's model for this turn.
	Model string `json:"model,omitempty"`
}

// TurnStarted is the answer of POST /api/boxes/{box}/turns.
type TurnStarted struct {
	RunID   string `json:"runId"`
	TraceID string `json:"traceId,omitempty"`
}

// decode reads a JSON body into v, refusing unknown fields, trailing data
// and bodies past maxBody.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, TypeInvalidRequest, "request body: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, TypeInvalidRequest, "request body: one JSON object, nothing after it")
	}
	return nil
}

func (tr TurnRequest) check() error {
	switch {
	case strings.TrimSpace(tr.Prompt) == "":
		return errorf(http.StatusBadRequest, TypeInvalidRequest, "the prompt is empty")
	case len(tr.Prompt) > MaxPrompt:
		return errorf(http.StatusBadRequest, TypeInvalidRequest, fmt.Sprintf("the prompt is %d bytes, past the %d a turn takes", len(tr.Prompt), MaxPrompt))
	case len(tr.Model) > 256 || strings.ContainsAny(tr.Model, " \t\r\n"):
		return errorf(http.StatusBadRequest, TypeInvalidRequest, "the model is not a model route")
	}
	return nil
}

// checkRunID refuses a run id the bridge could not have made.
func checkRunID(id string) error {
	if err := wire.ValidRunID(id); err != nil {
		return errorf(http.StatusBadRequest, TypeInvalidRequest, "run id: "+err.Error())
	}
	return nil
}

func (s *Server) postTurn(w http.ResponseWriter, r *http.Request) {
	var tr TurnRequest
	if err := decode(r, &tr); err != nil {
		writeError(w, err)
		return
	}
	if err := tr.check(); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("box")
	env, _, err := s.env(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	t, err := s.start(r.Context(), id, env, provider.Turn{Prompt: tr.Prompt, Model: tr.Model})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, TurnStarted{RunID: t.runID, TraceID: t.traceID})
}

// start runs a turn in the box in a goroutine of the server and returns
// once the bridge admitted it (the stream's first event names the run).
func (s *Server) start(ctx context.Context, box string, env *sandbox.Environment, pt provider.Turn) (*turn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errClosed
	}
	s.turnWG.Add(1)
	s.mu.Unlock()
	tctx, cancel := context.WithCancel(s.ctx)
	tctx, span := tracer.Start(tctx, "inspector.turn", trace.WithAttributes(attribute.String("boxctl.box_id", box)))
	t := &turn{box: box, started: time.Now(), cancel: cancel, done: make(chan struct{})}
	if sc := span.SpanContext(); sc.IsValid() {
		t.traceID = sc.TraceID().String()
	}
	admitted := make(chan error, 1)
	go func() {
		defer s.turnWG.Done()
		defer cancel()
		var serr error
		defer func() { tracing.End(span, serr) }()
		sent := false
		outcome := ""
		for ev, err := range env.Stream(tctx, pt) {
			if err != nil {
				serr, outcome = err, "error: "+err.Error()
				break
			}
			if !sent && ev.RunID != "" {
				sent = true
				t.runID = ev.RunID
				span.SetAttributes(attribute.String(provider.AttrRunID, ev.RunID))
				s.mu.Lock()
				s.turns[ev.RunID] = t
				s.mu.Unlock()
				admitted <- nil
			}
			if t.runID != "" {
				s.see(t.runID, ev)
			}
			if ev.Type == provider.EventStatus && ev.Status != provider.StatusStarted && ev.Status != provider.StatusProcessing {
				outcome = ev.Status
			}
		}
		if !sent {
			if serr == nil {
				serr = errors.New("the turn ended before the bridge admitted it")
			}
			admitted <- serr
		}
		t.outcome = outcome
		close(t.done)
		if serr != nil && sent {
			s.o.Logger.Warn("turn", "box", box, "run", t.runID, "err", serr)
		}
	}()
	wait := time.NewTimer(admitWait)
	defer wait.Stop()
	select {
	case err := <-admitted:
		if err != nil {
			return nil, err
		}
		return t, nil
	case <-ctx.Done():
		cancel()
		return nil, context.Cause(ctx)
	case <-wait.C:
		cancel()
		return nil, fmt.Errorf("the bridge did not admit the turn within %v", admitWait)
	}
}

// liveRun is the run of the turn this server streams in box id, if any.
func (s *Server) liveRun(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for run, t := range s.turns {
		if t.box == id && !t.ended() {
			return run
		}
	}
	return ""
}

func (t *turn) ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// endTurns stops following the turns of box id (a destroyed box).
func (s *Server) endTurns(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.turns {
		if t.box == id {
			t.cancel()
		}
	}
}

// see keeps the interaction requests a run's events carry, to answer
// them by id.
func (s *Server) see(run string, ev provider.Event) {
	if ev.Interaction == nil {
		return
	}
	s.mu.Lock()
	s.asks[run+"/"+ev.Interaction.ID] = *ev.Interaction
	s.mu.Unlock()
}

// Run is one run of a box, as GET /api/boxes/{box}/runs lists them.
type Run struct {
	RunID   string `json:"runId"`
	Started string `json:"started,omitempty"`
	Ended   string `json:"ended,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Live    bool   `json:"live"`
	TraceID string `json:"traceId,omitempty"`
}

// runs lists box id's runs: those its turn.ended events name, with the
// turns this server streams; newest first.
func (s *Server) runs(ctx context.Context, id string) ([]Run, error) {
	rec, err := s.record(id)
	if err != nil {
		return nil, err
	}
	evs, err := s.boxEvents(ctx, id, rec.RunTag)
	if err != nil {
		return nil, err
	}
	out := []Run{}
	var lastStart time.Time
	for _, ev := range evs {
		switch {
		case ev.Type == sandbox.EventTurnStarted:
			lastStart = ev.Time
			if ev.RunID != "" {
				out = append(out, Run{RunID: ev.RunID, Started: stamp(ev.Time)})
			}
		case ev.Type == sandbox.EventTurnEnded && ev.RunID != "":
			i := slices.IndexFunc(out, func(r Run) bool { return r.RunID == ev.RunID })
			if i < 0 {
				out = append(out, Run{RunID: ev.RunID, Started: stamp(lastStart)})
				i = len(out) - 1
			}
			out[i].Ended, out[i].Outcome = stamp(ev.Time), ev.Reason
		}
	}
	s.mu.Lock()
	for run, t := range s.turns {
		if t.box != id {
			continue
		}
		i := slices.IndexFunc(out, func(r Run) bool { return r.RunID == run })
		if i < 0 {
			out = append(out, Run{RunID: run, Started: stamp(t.started)})
			i = len(out) - 1
		}
		out[i].Live, out[i].TraceID = !t.ended(), t.traceID
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Run) int { return strings.Compare(b.Started, a.Started) })
	return out, nil
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.runs(r.Context(), r.PathValue("box"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, runs)
}

// session returns control of run of box id.
func (s *Server) runSession(ctx context.Context, id, run string) (*provider.Session, error) {
	if err := checkRunID(run); err != nil {
		return nil, err
	}
	env, _, err := s.env(ctx, id)
	if err != nil {
		return nil, err
	}
	return env.Run(ctx, run)
}

// Event is one event of a run as the page receives it.
type Event struct {
	ID             string                   `json:"id"`
	Type           string                   `json:"type"`
	RunID          string                   `json:"runId,omitempty"`
	Delta          string                   `json:"delta,omitempty"`
	Part           *provider.Part           `json:"part,omitempty"`
	Status         string                   `json:"status,omitempty"`
	Detail         string                   `json:"detail,omitempty"`
	Usage          *provider.Usage          `json:"usage,omitempty"`
	ProviderModels []string                 `json:"providerModels,omitempty"`
	Interaction    *wire.InteractionRequest `json:"interaction,omitempty"`
	Model          string                   `json:"model,omitempty"`
	FinalText      string                   `json:"finalText,omitempty"`
	FinishReason   string                   `json:"finishReason,omitempty"`
}

func eventOf(ev provider.Event) Event {
	return Event{ID: ev.ID, Type: ev.Type, RunID: ev.RunID, Delta: ev.Delta, Part: ev.Part, Status: ev.Status, Detail: ev.Detail,
		Usage: ev.Usage, ProviderModels: ev.ProviderModels, Interaction: ev.Interaction, Model: ev.Model,
		FinalText: ev.FinalText, FinishReason: ev.FinishReason}
}

// SSE event names of GET /api/boxes/{box}/runs/{run}/events: each run
// event is an "event" frame with an Event; the stream ends with an "end"
// frame, or an "failure" frame with an ErrorResponse.
const (
	sseEvent   = "event"
	sseEnd     = "end"
	sseFailure = "failure"
)

// cursor reads the replay cursor: ?since= or Last-Event-ID (an EventSource
// reconnecting), "" for the start.
func cursor(r *http.Request) (string, error) {
	since := r.URL.Query().Get("since")
	if since == "" {
		since = r.Header.Get("Last-Event-ID")
	}
	if since == "" {
		return "", nil
	}
	if n, err := strconv.ParseInt(since, 10, 64); err != nil || n < 0 {
		return "", errorf(http.StatusBadRequest, TypeInvalidRequest, "since: want an event id (a non-negative integer)")
	}
	return since, nil
}

// runEvents relays a run's events from the bridge: replayed from the
// cursor, then live until the run ends.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	since, err := cursor(r)
	if err != nil {
		writeError(w, err)
		return
	}
	run := r.PathValue("run")
	sess, err := s.runSession(r.Context(), r.PathValue("box"), run)
	if err != nil {
		writeError(w, err)
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, ": connected\n\n")
	if fl != nil {
		fl.Flush()
	}
	send := func(id, name string, v any) bool {
		b, _ := json.Marshal(v)
		var sb strings.Builder
		if id != "" {
			sb.WriteString("id: " + id + "\n")
		}
		sb.WriteString("event: " + name + "\ndata: ")
		sb.Write(b)
		sb.WriteString("\n\n")
		if _, err := io.WriteString(w, sb.String()); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	for ev, err := range sess.Events(r.Context(), since) {
		if err != nil {
			if r.Context().Err() == nil {
				send("", sseFailure, ErrorResponse{Error: apiError(err)})
			}
			return
		}
		s.see(run, ev)
		if !send(ev.ID, sseEvent, eventOf(ev)) {
			return
		}
	}
	send("", sseEnd, map[string]string{"runId": run})
}

// Cancelled is the answer of POST .../cancel.
type Cancelled struct {
	Status   string `json:"status"`
	Terminal bool   `json:"terminal"`
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	sess, err := s.runSession(r.Context(), r.PathValue("box"), r.PathValue("run"))
	if err != nil {
		writeError(w, err)
		return
	}
	st, err := sess.Cancel(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Cancelled{Status: st.Status, Terminal: st.Terminal})
}

// Answer is the body of POST .../interactions/{ask}.
type Answer struct {
	// Decision is "allow" (once) or "deny".
	Decision string `json:"decision"`
}

// The decisions of an Answer.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var a Answer
	if err := decode(r, &a); err != nil {
		writeError(w, err)
		return
	}
	var resp wire.InteractionResponse
	switch a.Decision {
	case DecisionAllow:
		resp = wire.InteractionResponse{Outcome: wire.OutcomeAccepted, Data: provider.PermissionGrant(wire.GrantAllowOnce)}
	case DecisionDeny:
		resp = wire.InteractionResponse{Outcome: wire.OutcomeDeclined}
	default:
		writeError(w, errorf(http.StatusBadRequest, TypeInvalidRequest, `decision: want "allow" or "deny"`))
		return
	}
	run, ask := r.PathValue("run"), r.PathValue("ask")
	s.mu.Lock()
	req, ok := s.asks[run+"/"+ask]
	s.mu.Unlock()
	if !ok {
		writeError(w, errorf(http.StatusNotFound, TypeNotFound, fmt.Sprintf("run %s asked no interaction %q that this inspector saw", run, ask)))
		return
	}
	if req.Kind != wire.InteractionKindPermission {
		writeError(w, errorf(http.StatusBadRequest, TypeInvalidRequest, fmt.Sprintf("interaction %q is a %s: the inspector answers permissions only", ask, req.Kind)))
		return
	}
	sess, err := s.runSession(r.Context(), r.PathValue("box"), run)
	if err != nil {
		writeError(w, err)
		return
	}
	cmd, err := provider.NewInteractionCommand("ui-"+secret()[:24], req, resp)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, TypeInvalidRequest, err.Error()))
		return
	}
	ack, err := sess.RespondToInteraction(r.Context(), cmd)
	if err != nil {
		writeError(w, err)
		return
	}
	if ack.Status != wire.InteractionAccepted && ack.Status != wire.InteractionAlreadyResolvedSame {
		writeError(w, errorf(http.StatusConflict, TypeConflict, fmt.Sprintf("the bridge answered %s: %s", ack.Status, ack.Message)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": ack.Status})
}
