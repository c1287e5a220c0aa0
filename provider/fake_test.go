package provider

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// fakeBridge is an httptest stand-in that speaks the documented wire and
// serves recorded SSE transcripts. $RUN and $SESSION in a transcript are
// replaced by the run's id and session id.
type fakeBridge struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	runs     map[string]*fakeRun
	requests []string

	// transcript is served for POST /v1/chat/completions (streamed) and
	// GET /v1/runs/:id/events; replay, when set, replaces it for the latter.
	transcript string
	replay     string
	// final is the snapshot status a run reaches when its stream ends.
	final string
	// aggregate, when set, answers the non-streamed confirmation.
	aggregate func(w http.ResponseWriter, r *fakeRun)
	// headers, when set, rewrites the admission headers of a stream.
	headers func(h http.Header)
	// snapshot, when set, rewrites a snapshot before it is sent.
	snapshot func(s *wire.RunSnapshot)
	// caps is the capability document; capsGate, when set, is waited on.
	caps     string
	capsGate chan struct{}
	// routes override any route by "METHOD /path".
	routes  map[string]http.HandlerFunc
	cancels int
	// reasons are the reasons of the cancellations received, in order.
	reasons []string
	// sessions are the retained native sessions (POST /v1/sessions), and
	// turns the turn requests they admitted, in order.
	sessions map[string]*wire.SessionView
	turns    []wire.TurnRequest
	// traceparents are the requests' traceparent headers, in order.
	traceparents []string
	// started is closed when the first run is registered.
	started     chan struct{}
	startedOnce sync.Once
}

type fakeRun struct {
	ref    ControlRef
	status string
	body   map[string]any
}

func newFake(t *testing.T, transcript string) *fakeBridge {
	t.Helper()
	f := &fakeBridge{t: t, runs: map[string]*fakeRun{}, transcript: transcript, final: wire.StatusDone, routes: map[string]http.HandlerFunc{},
		started: make(chan struct{}), sessions: map[string]*wire.SessionView{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// loadTranscript reads testdata/name.
func loadTranscript(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func (f *fakeBridge) provider(t *testing.T, mod ...func(*Options)) *Provider {
	t.Helper()
	o := Options{BaseURL: f.srv.URL, BearerToken: "secret-token", DefaultModel: "claude-code/sonnet"}
	for _, m := range mod {
		m(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fakeBridge) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *fakeBridge) count(prefix string) int {
	n := 0
	for _, r := range f.log() {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeBridge) run(id string) *fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[id]
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(wire.ErrorResponse{Error: wire.ErrorBody{Message: msg, Type: typ}})
}

func (f *fakeBridge) serve(w http.ResponseWriter, r *http.Request) {
	r.URL.Path = strings.TrimPrefix(r.URL.Path, "/base") // a base URL may carry a path
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.requests = append(f.requests, key)
	f.traceparents = append(f.traceparents, r.Header.Get("traceparent"))
	h := f.routes[key]
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer secret-token" {
		writeError(w, 401, wire.TypeInvalidAuthentication, "bad bearer")
		return
	}
	if h != nil {
		h(w, r)
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case key == "POST /v1/chat/completions":
		f.chat(w, r)
	case key == "GET /v1/capabilities":
		f.capabilities(w)
	case key == "POST /v1/sessions":
		f.createSession(w, r)
	case len(parts) == 3 && parts[1] == "sessions" && r.Method == http.MethodGet:
		f.getSession(w, parts[2])
	case len(parts) == 4 && parts[1] == "sessions" && parts[3] == "turns" && r.Method == http.MethodPost:
		f.admitTurn(w, r, parts[2])
	case len(parts) == 3 && parts[1] == "runs" && r.Method == http.MethodGet:
		f.writeSnapshot(w, parts[2])
	case len(parts) == 4 && parts[1] == "runs" && parts[3] == "events":
		fr := f.run(parts[2])
		if fr == nil {
			writeError(w, 404, wire.TypeNotFound, "unknown run")
			return
		}
		t := f.transcript
		if f.replay != "" {
			t = f.replay
		}
		f.stream(w, fr, t, r.Header.Get(wire.HeaderLastEventID))
	case len(parts) == 4 && parts[1] == "runs" && parts[3] == "cancel":
		f.cancel(w, r, parts[2])
	default:
		writeError(w, 404, wire.TypeNotFound, "no route "+key)
	}
}

// chatHeaders registers the run of a chat request and sets its identity
// headers; it answers the error itself and returns nil on a conflict.
func (f *fakeBridge) chatHeaders(w http.ResponseWriter, r *http.Request) (*fakeRun, map[string]any) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, 400, wire.TypeInvalidRequest, err.Error())
		return nil, nil
	}
	str := func(k string) string { s, _ := body[k].(string); return s }
	digest, _ := wire.RequestDigest(backendOfRoute(str("model")), body)
	ref := ControlRef{RunID: str("run_id"), Provider: str("provider"), EnvironmentID: str("environment_id"), SessionID: str("session_id"), ExecutionID: str("execution_id"), RequestDigest: digest}
	f.mu.Lock()
	fr := f.runs[ref.RunID]
	if fr == nil {
		fr = &fakeRun{ref: ref, status: wire.StatusRunning, body: body}
		f.runs[ref.RunID] = fr
	} else if fr.ref.RequestDigest != digest {
		f.mu.Unlock()
		writeError(w, 409, wire.TypeRunIdentityConflict, "run id reused for a different request")
		return nil, nil
	}
	f.mu.Unlock()
	f.startedOnce.Do(func() { close(f.started) })
	f.setRunHeaders(w.Header(), fr.ref)
	return fr, body
}

func (f *fakeBridge) chat(w http.ResponseWriter, r *http.Request) {
	fr, body := f.chatHeaders(w, r)
	if fr == nil {
		return
	}
	if stream, _ := body["stream"].(bool); !stream {
		if f.aggregate != nil {
			f.aggregate(w, fr)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"claude-code/sonnet","choices":[{"index":0,"message":{"role":"assistant","content":"aggregate text"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"estimated":false},"provider_models":["claude-sonnet-4-5"]}`)
		return
	}
	if f.headers != nil {
		f.headers(w.Header())
	}
	f.stream(w, fr, f.transcript, r.Header.Get(wire.HeaderLastEventID))
}

func (f *fakeBridge) setRunHeaders(h http.Header, ref ControlRef) {
	h.Set(wire.HeaderRunID, ref.RunID)
	h.Set(wire.HeaderRunRequestDigest, ref.RequestDigest)
	h.Set(wire.HeaderRunProvider, ref.Provider)
	h.Set(wire.HeaderRunEnvironmentID, ref.EnvironmentID)
	h.Set(wire.HeaderRunSessionID, ref.SessionID)
	h.Set(wire.HeaderRunExecutionID, ref.ExecutionID)
}

// stream writes the transcript's frames after the cursor, then ends the run.
func (f *fakeBridge) stream(w http.ResponseWriter, fr *fakeRun, transcript, cursor string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	text := strings.NewReplacer("$RUN", fr.ref.RunID, "$SESSION", fr.ref.SessionID).Replace(transcript)
	var after int64
	fmt.Sscan(cursor, &after)
	for _, fr := range strings.SplitAfter(text, "\n\n") {
		var id int64
		for _, line := range strings.Split(fr, "\n") {
			if strings.HasPrefix(line, "id: ") {
				fmt.Sscan(strings.TrimPrefix(line, "id: "), &id)
			}
		}
		if id != 0 && id <= after {
			continue
		}
		io.WriteString(w, fr)
		w.(http.Flusher).Flush()
	}
	f.mu.Lock()
	if fr.status == wire.StatusRunning {
		fr.status = f.final
	}
	f.mu.Unlock()
}

func (f *fakeBridge) snapshotOf(fr *fakeRun) wire.RunSnapshot {
	s := wire.RunSnapshot{ID: fr.ref.RunID, RequestDigest: fr.ref.RequestDigest, Status: fr.status, State: wire.StateRunning,
		Terminal: fr.status != wire.StatusRunning, Provider: fr.ref.Provider, EnvironmentID: fr.ref.EnvironmentID,
		SessionID: fr.ref.SessionID, ExecutionID: fr.ref.ExecutionID}
	if s.Terminal {
		s.State = wire.StateTerminal
	}
	if f.snapshot != nil {
		f.snapshot(&s)
	}
	return s
}

func (f *fakeBridge) writeSnapshot(w http.ResponseWriter, id string) {
	f.mu.Lock()
	fr := f.runs[id]
	var s wire.RunSnapshot
	if fr != nil {
		s = f.snapshotOf(fr)
	}
	f.mu.Unlock()
	if fr == nil {
		writeError(w, 404, wire.TypeNotFound, "unknown run")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s)
}

func (f *fakeBridge) cancel(w http.ResponseWriter, r *http.Request, id string) {
	var req wire.CancellationRequest
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels++
	f.reasons = append(f.reasons, req.Reason)
	fr := f.runs[id]
	if fr == nil {
		writeError(w, 404, wire.TypeNotFound, "unknown run")
		return
	}
	effect := wire.EffectNotLive
	if fr.status == wire.StatusRunning {
		fr.status, effect = wire.StatusCancelled, wire.EffectCancelled
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(wire.CancellationAck{OperationID: req.OperationID, RequestDigest: req.RequestDigest, Run: req.Run, Status: wire.CancelAccepted, Effect: effect})
}

// createSession creates a retained native session; its create digest is
// the digest of the request body.
func (f *fakeBridge) createSession(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, 400, wire.TypeInvalidRequest, err.Error())
		return
	}
	view := &wire.SessionView{}
	view.ID, _ = body["id"].(string)
	view.Model, _ = body["model"].(string)
	view.CreateRequestDigest, _ = wire.Digest(body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions[view.ID] != nil {
		writeError(w, 409, wire.TypeSessionConflict, "session exists")
		return
	}
	f.sessions[view.ID] = view
	w.WriteHeader(201)
	json.NewEncoder(w).Encode(view)
}

func (f *fakeBridge) getSession(w http.ResponseWriter, id string) {
	f.mu.Lock()
	view := f.sessions[id]
	f.mu.Unlock()
	if view == nil {
		writeError(w, 404, wire.TypeNotFound, "unknown session")
		return
	}
	json.NewEncoder(w).Encode(view)
}

// admitTurn admits a retained turn as the bridge does: the same run id
// with the same request attaches to the admitted run, with another
// request it is a conflict.
func (f *fakeBridge) admitTurn(w http.ResponseWriter, r *http.Request, sessionID string) {
	data, _ := io.ReadAll(r.Body)
	var body wire.TurnRequest
	var generic map[string]any
	if json.Unmarshal(data, &body) != nil || json.Unmarshal(data, &generic) != nil {
		writeError(w, 400, wire.TypeInvalidRequest, "invalid turn request")
		return
	}
	digest, _ := wire.Digest(map[string]any{"session": sessionID, "turn": generic})
	f.mu.Lock()
	defer f.mu.Unlock()
	view := f.sessions[sessionID]
	if view == nil {
		writeError(w, 404, wire.TypeNotFound, "unknown session")
		return
	}
	if body.TurnID == "" || body.ExecutionID == "" || body.RunID == "" {
		writeError(w, 400, wire.TypeInvalidRequest, "turn_id, execution_id and run_id are required")
		return
	}
	f.turns = append(f.turns, body)
	ref := ControlRef{RunID: body.RunID, Provider: body.Provider, EnvironmentID: body.EnvironmentID, SessionID: sessionID, ExecutionID: body.ExecutionID, RequestDigest: digest}
	if fr := f.runs[ref.RunID]; fr != nil && fr.ref != ref {
		writeError(w, 409, wire.TypeTurnConflict, "turn or run is bound to a different turn")
		return
	} else if fr == nil {
		f.runs[ref.RunID] = &fakeRun{ref: ref, status: wire.StatusRunning}
	}
	f.startedOnce.Do(func() { close(f.started) })
	w.WriteHeader(202)
	json.NewEncoder(w).Encode(wire.TurnAdmission{Session: *view, Run: wire.AdmittedRun{ID: ref.RunID, Provider: ref.Provider,
		EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID, RequestDigest: ref.RequestDigest}})
}

func (f *fakeBridge) capabilities(w http.ResponseWriter) {
	if f.capsGate != nil {
		<-f.capsGate
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, f.caps)
}

// capsProfile is the profile block of the test documents.
const capsProfile = `"profile":{"namedProfiles":false,"systemPrompt":{"replace":false,"append":false},"instructions":false,"tools":false,
"permissions":false,"mcp":false,"subagents":false,"resources":{"files":false,"instructions":false},"runtimeUpdate":false,"validation":true}`

// fullCaps is a document that proves the whole retained contract.
const fullCaps = `{` + capsProfile + `,"streaming":{"live":true,"replay":true,"detach":true,"turnIdempotency":true},
"sessions":{"continue":true,"list":true,"messages":false},"retainedControl":{"exactRunIdentity":true,"resultIdentity":true,"eventIdentity":true,"cancellationIdempotency":true},
"workspace":{"read":false,"write":false,"exec":false,"git":false,"upload":false,"download":false},"branching":{"checkpoint":false,"fork":false},
"placement":true,"usage":true,"confidential":false}`
