package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestControlRef_JSONRoundTrip(t *testing.T) {
	ref := ControlRef{RunID: "run-1", Provider: "cli-bridge", EnvironmentID: "cb1.abc", SessionID: "s", ExecutionID: "e", RequestDigest: "sha256:" + strings.Repeat("ab", 32)}
	data, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"runId":"run-1","provider":"cli-bridge","environmentId":"cb1.abc","sessionId":"s","executionId":"e","requestDigest":"sha256:abababababababababababababababababababababababababababababababab"}`
	if string(data) != want {
		t.Errorf("json.Marshal(ref) = %s, want %s", data, want)
	}
	var back ControlRef
	if err := json.Unmarshal(data, &back); err != nil || back != ref {
		t.Errorf("round trip = %+v, %v, want %+v", back, err, ref)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

func TestResolveModel(t *testing.T) {
	tests := []struct {
		name                    string
		def, harness, profModel string
		provider, turn, want    string
		wantErr                 bool
	}{
		{name: "turn wins", def: "claude-code/opus", harness: "claude-code", profModel: "haiku", turn: "sonnet", want: "claude-code/sonnet"},
		{name: "provider default next", def: "opus", harness: "claude-code", profModel: "haiku", want: "claude-code/opus"},
		{name: "profile default last", harness: "claude-code", profModel: "haiku", want: "claude-code/haiku"},
		{name: "harness only", harness: "codex", want: "codex"},
		{name: "pi provider", harness: "pi", profModel: "gpt-5", provider: "openai", want: "pi/openai/gpt-5"},
		{name: "qualified kept", harness: "claude-code", turn: "claude-code/sonnet", want: "claude-code/sonnet"},
		{name: "no harness", def: "claude-code/sonnet", want: "claude-code/sonnet"},
		{name: "nothing", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := CreateRequest{Profile: Profile{Name: "p", Harness: tt.harness, Model: ProfileModel{Default: tt.profModel, Provider: tt.provider}}}
			got, err := resolveModel(Options{DefaultModel: tt.def}, &req, tt.turn)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("resolveModel = %q, %v, want %q (err %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestRefusalsBeforeNetwork(t *testing.T) {
	f := newFake(t, "")
	p := f.provider(t, func(o *Options) { o.DefaultModel = "" })
	env, err := p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "nomodel"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Dispatch(t.Context(), Turn{Prompt: "x"}); err == nil || !strings.Contains(err.Error(), errNoModel.Error()) {
		t.Errorf("Dispatch without a model = %v, want %q", err, errNoModel)
	}
	_, err = p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "w", Harness: "claude-code"}, Workspace: &Workspace{Cwd: "/w", RepoURL: "https://example.invalid/r.git"}})
	if err == nil || !strings.Contains(err.Error(), "workspace.cwd names a host directory") {
		t.Errorf("Create with a repository cwd = %v", err)
	}
	if n := len(f.log()); n != 0 {
		t.Errorf("requests = %v, want none", f.log())
	}
}

func TestReconstructed_refusals(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	f.caps = fullCaps
	p := f.provider(t)
	created := newEnv(t, f)
	ref := dispatch(t, created, "s1")

	restarted := f.provider(t) // a new process: nothing in memory
	env, err := restarted.Get(t.Context(), created.ID(), GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = p
	if env.Capabilities().RetainedControl == nil {
		t.Error("Get: retained control not enabled by a document that proves it")
	}
	_, err = env.Dispatch(t.Context(), Turn{Prompt: "x"})
	checkRefusal(t, "Dispatch", err, "a reconstructed cli-bridge environment can only control an existing run")
	_, err = drain(env.Stream(t.Context(), Turn{Prompt: "x"}))
	checkRefusal(t, "Stream", err, "a reconstructed cli-bridge environment can only control an existing run")
	s, err := env.Session("s1", SessionOptions{ControlRef: &ref})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Prompt(t.Context(), Turn{Prompt: "x"})
	checkRefusal(t, "Prompt", err, "a reconstructed cli-bridge session cannot start another turn")
	_, err = s.ContinueNative(t.Context(), wire.ContinuationRequest{}, wire.ContinuationTurn{})
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ContinueNative without the capability = %v, want errors.ErrUnsupported", err)
	}
	res, err := s.Result(t.Context())
	if err != nil || res.Text != "Hello world" || res.RequestDigest != ref.RequestDigest {
		t.Errorf("Result after restart = %+v, %v", res, err)
	}
	if err := env.Destroy(t.Context()); err != nil || f.cancels != 0 {
		t.Errorf("Destroy of a reconstructed environment = %v with %d cancels, want nil and none", err, f.cancels)
	}
}

func checkRefusal(t *testing.T, op string, err error, msg string) {
	t.Helper()
	var re *ReconstructedError
	if !errors.As(err, &re) || err.Error() != msg {
		t.Errorf("%s = %v, want *ReconstructedError %q", op, err, msg)
	}
}

func TestSession_controlRefMismatch(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	env := newEnv(t, f)
	ref := dispatch(t, env, "s1")
	mutations := map[string]func(*ControlRef){
		"provider":    func(r *ControlRef) { r.Provider = "other" },
		"environment": func(r *ControlRef) { r.EnvironmentID = "cb1.other" },
		"session":     func(r *ControlRef) { r.SessionID = "other" },
		"run":         func(r *ControlRef) { r.RunID = "other-run" },
		"execution":   func(r *ControlRef) { r.ExecutionID = "other" },
		"digest":      func(r *ControlRef) { r.RequestDigest = "sha256:" + strings.Repeat("0", 64) },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			bad := ref
			mutate(&bad)
			_, err := env.Session("s1", SessionOptions{ControlRef: &bad})
			var im *IdentityMismatchError
			if !errors.As(err, &im) {
				t.Fatalf("Session with a wrong %s = %v, want *IdentityMismatchError", name, err)
			}
		})
	}
	// A fresh process with a forged digest attaches, but the bridge's
	// snapshot exposes it.
	other, _ := f.provider(t).Get(t.Context(), env.ID(), GetOptions{Capabilities: &Capabilities{}})
	bad := ref
	bad.RequestDigest = "sha256:" + strings.Repeat("0", 64)
	s, err := other.Session("s1", SessionOptions{ControlRef: &bad})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Status(t.Context())
	var im *IdentityMismatchError
	if !errors.As(err, &im) {
		t.Errorf("Status with a forged digest = %v, want *IdentityMismatchError", err)
	}
}

func TestProvider_LookupRun(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	env := newEnv(t, f)
	ref := dispatch(t, env, "s1")
	p := f.provider(t)
	planned := PlannedRun{RunID: ref.RunID, EnvironmentID: ref.EnvironmentID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID}
	got, err := p.LookupRun(t.Context(), planned)
	if err != nil || got == nil || *got != ref {
		t.Fatalf("LookupRun = %v, %v, want %+v", got, err, ref)
	}
	for name, mutate := range map[string]func(*PlannedRun){
		"run":         func(p *PlannedRun) { p.RunID = "missing-run" },
		"environment": func(p *PlannedRun) { p.EnvironmentID = "cb1.other" },
		"session":     func(p *PlannedRun) { p.SessionID = "other" },
		"execution":   func(p *PlannedRun) { p.ExecutionID = "other" },
		"provider":    func(p *PlannedRun) { p.Provider = "other-provider" },
	} {
		t.Run(name, func(t *testing.T) {
			pl := planned
			mutate(&pl)
			got, err := p.LookupRun(t.Context(), pl)
			if err != nil || got != nil {
				t.Errorf("LookupRun with a wrong %s = %v, %v, want nothing", name, got, err)
			}
		})
	}
	before := len(f.log())
	if _, err := p.LookupRun(t.Context(), PlannedRun{RunID: strings.Repeat("r", 129), EnvironmentID: "e", SessionID: "s", ExecutionID: "x"}); err == nil {
		t.Error("LookupRun with an oversized run id: no error")
	}
	if len(f.log()) != before {
		t.Error("LookupRun with an invalid run id made a request")
	}
}

func TestTypedErrors(t *testing.T) {
	f := newFake(t, "")
	f.routes["POST /v1/chat/completions"] = func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 409, wire.TypeRunIdentityConflict, "run id reused")
	}
	f.routes["GET /v1/runs/gone/events"] = func(w http.ResponseWriter, r *http.Request) {
		one, first, last := int64(1), int64(40), int64(90)
		w.WriteHeader(410)
		json.NewEncoder(w).Encode(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeExpiredReplayCursor, Message: "expired", RunID: "gone",
			RequestedEventID: &one, FirstAvailableEventID: &first, LastEventID: &last}})
	}
	env := newEnv(t, f)
	_, err := env.Dispatch(t.Context(), Turn{Prompt: "x"})
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Type != wire.TypeRunIdentityConflict {
		t.Errorf("Dispatch = %v, want *ConflictError run_identity_conflict", err)
	}
	gone := ControlRef{RunID: "gone", Provider: DefaultName, EnvironmentID: env.ID(), SessionID: "s", ExecutionID: "gone", RequestDigest: "sha256:" + strings.Repeat("1", 64)}
	s, _ := env.Session("s", SessionOptions{ControlRef: &gone})
	_, err = drain(s.Events(t.Context(), "1"))
	var ee *ExpiredCursorError
	if !errors.As(err, &ee) || ee.FirstAvailable != 40 || ee.Last != 90 || ee.Requested != 1 {
		t.Errorf("Events = %v, want *ExpiredCursorError 1/40/90", err)
	}
	_, err = s.Status(t.Context())
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("Status of an unknown run = %v, want *NotFoundError", err)
	}
	dead, _ := New(Options{BaseURL: "http://127.0.0.1:1", BearerToken: "secret-token"})
	_, err = dead.LookupRun(t.Context(), PlannedRun{RunID: "r", EnvironmentID: "e", SessionID: "s", ExecutionID: "x"})
	var te *TransportError
	if !errors.As(err, &te) || !te.Retryable() {
		t.Errorf("LookupRun on a closed port = %v, want a retryable *TransportError", err)
	}
	if strings.Contains(err.Error(), "secret-token") {
		t.Error("an error carries the bearer token")
	}
}

// TestGatewayErrors: a 502, 503 or 504 without the bridge's error
// envelope is a gateway's (a bridge restarting behind a vendor's proxy): a
// retryable *TransportError, outcome unknown; the bridge's own 503 stays
// a *BridgeError with its type.
func TestGatewayErrors(t *testing.T) {
	for _, tt := range []struct {
		name      string
		status    int
		typ       string
		transport bool
	}{
		{"bad gateway", http.StatusBadGateway, "", true},
		{"unavailable", http.StatusServiceUnavailable, "", true},
		{"gateway timeout", http.StatusGatewayTimeout, "", true},
		{"bridge unavailable", http.StatusServiceUnavailable, wire.TypeBackendNotReady, false},
		{"bridge fault", http.StatusInternalServerError, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, "")
			f.routes["POST /v1/chat/completions"] = func(w http.ResponseWriter, r *http.Request) {
				if tt.typ != "" {
					writeError(w, tt.status, tt.typ, "not ready")
					return
				}
				http.Error(w, http.StatusText(tt.status), tt.status)
			}
			_, err := newEnv(t, f).Dispatch(t.Context(), Turn{Prompt: "x"})
			var te *TransportError
			var ge *GatewayError
			var be *BridgeError
			switch {
			case tt.transport && (!errors.As(err, &te) || !errors.As(err, &ge) || ge.Status != tt.status || !te.Retryable()):
				t.Errorf("Dispatch = %v, want a retryable *TransportError of a %d *GatewayError", err, tt.status)
			case !tt.transport && (!errors.As(err, &be) || be.Status != tt.status || be.Type != tt.typ):
				t.Errorf("Dispatch = %v, want a *BridgeError %d %q", err, tt.status, tt.typ)
			}
		})
	}
}

// handlerTransport serves requests in process, so a synctest bubble sees
// every goroutine of a request and can tell when all of them are blocked.
type handlerTransport struct{ h http.Handler }

func (tr handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	tr.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func TestCapabilities_singleFlight(t *testing.T) {
	f := newFake(t, "")
	f.caps = fullCaps
	synctest.Test(t, func(t *testing.T) {
		f.capsGate = make(chan struct{})
		p := f.provider(t, func(o *Options) {
			o.HTTPClient = &http.Client{Transport: handlerTransport{http.HandlerFunc(f.serve)}}
		})
		const callers = 8
		var wg sync.WaitGroup
		results := make([]*Capabilities, callers)
		for i := range callers {
			wg.Go(func() {
				c, err := p.Capabilities(t.Context())
				if err != nil {
					t.Error(err)
				}
				results[i] = c
			})
		}
		// Every caller is now either the one request, held at the gate, or
		// waiting for its answer.
		synctest.Wait()
		close(f.capsGate)
		wg.Wait()
		f.capsGate = nil
		if n := f.count("GET /v1/capabilities"); n != 1 {
			t.Errorf("concurrent discovery requests = %d, want 1", n)
		}
		for _, c := range results {
			if c == nil || !c.RetainedControlProven() {
				t.Fatalf("Capabilities = %+v, want retained control", c)
			}
		}
	})
	p := f.provider(t)
	if _, err := p.Capabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := f.count("GET /v1/capabilities"); n != 2 {
		t.Errorf("discovery requests after a later query = %d, want 2 (no stale cache)", n)
	}
	// Created environments of a discovered route carry the document.
	env, err := p.Create(t.Context(), CreateRequest{Profile: Profile{Name: "w"}})
	if err != nil || env.Capabilities().RetainedControl == nil {
		t.Errorf("Create after discovery = %v, retained %v", err, env.Capabilities().RetainedControl)
	}
}

func TestNarrow_partialContract(t *testing.T) {
	var doc Capabilities
	if err := json.Unmarshal([]byte(fullCaps), &doc); err != nil {
		t.Fatal(err)
	}
	doc.RetainedControl.CancellationIdempotency = false
	doc.NativeContinuation = &wire.NativeContinuationCaps{AtomicBoundary: true}
	got := narrow(Options{BaseURL: "http://h"}, &doc)
	if got.RetainedControl != nil || got.NativeContinuation != nil || got.Interactions != nil || got.Sessions.List {
		t.Errorf("narrow(partial) = %+v, want no retained control, native continuation, interactions or list", got)
	}
}

func TestEnvironmentID(t *testing.T) {
	d := "sha256:" + strings.Repeat("c", 64)
	id, err := environmentID(route{Backend: "claude-code", Model: "claude-code/sonnet", CreateDigest: d}, "key")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := environmentID(route{Backend: "claude-code", Model: "claude-code/sonnet", CreateDigest: d}, "key")
	if id != again {
		t.Error("the same idempotency key gave two ids")
	}
	r, err := parseEnvironmentID(id)
	if diff := cmp.Diff(route{Backend: "claude-code", Model: "claude-code/sonnet", CreateDigest: d}, r); err != nil || diff != "" {
		t.Errorf("parseEnvironmentID = %v (-want +got):\n%s", err, diff)
	}
	for _, bad := range []string{"", " cb1.x", "plain-id", "cb1.!!!", id + "A"} {
		if _, err := parseEnvironmentID(bad); err == nil {
			t.Errorf("parseEnvironmentID(%q): no error", bad)
		}
	}
	if _, err := environmentID(route{Backend: "codex", Model: "claude-code/sonnet", CreateDigest: d}, ""); err == nil {
		t.Error("a model of another harness was accepted")
	}
}

func TestCreate_idempotency(t *testing.T) {
	f := newFake(t, "")
	p := f.provider(t)
	req := CreateRequest{Profile: Profile{Name: "w", Harness: "claude-code"}, IdempotencyKey: "k"}
	a, err := p.Create(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Create(t.Context(), req)
	if a != b {
		t.Error("the same idempotency key and request gave two environments")
	}
	req.Profile.Instructions = "altered"
	_, err = p.Create(t.Context(), req)
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Errorf("Create with an altered profile = %v, want *ConflictError", err)
	}
	other, _ := f.provider(t).Create(t.Context(), req)
	if other.ID() == a.ID() {
		t.Error("an altered profile reused the environment id")
	}
}

func TestObserve(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	env := newEnv(t, f, func(o *Options) { o.BaseURL = strings.Replace(f.srv.URL, "http://", "http://user:pw@", 1) + "/base" })
	o, err := env.Observe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if o.ModelUsage.State != Unavailable || o.Resources.State != Unavailable || o.AccountQuota.State != Unavailable || o.ComputeBilling.Reason == "" {
		t.Errorf("Observe before a turn = %+v", o)
	}
	if o.Endpoint.State != Known || o.Endpoint.Value.Host != "127.0.0.1" || o.Endpoint.Value.Port == 0 {
		t.Errorf("endpoint = %+v", o.Endpoint)
	}
	data, _ := json.Marshal(o)
	for _, leak := range []string{"pw", "secret-token", "/base"} {
		if strings.Contains(string(data), leak) {
			t.Errorf("observation leaks %q: %s", leak, data)
		}
	}
	if _, err := drain(env.Stream(t.Context(), Turn{Prompt: "hi", ExecutionID: "exec-1"})); err != nil {
		t.Fatal(err)
	}
	o, _ = env.Observe(context.Background())
	if o.ModelUsage.State != Known || o.ModelUsage.Value.OutputTokens != 7 || o.ModelUsage.Provenance.Source != "exec-1" {
		t.Errorf("model usage after a turn = %+v", o.ModelUsage)
	}
	if err := env.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	o, _ = env.Observe(t.Context())
	if o.Lifecycle.State != Known || o.Lifecycle.Value != "stopped" {
		t.Errorf("lifecycle after Destroy = %+v", o.Lifecycle)
	}
}

func TestUsageTruthfulness(t *testing.T) {
	tests := []struct {
		raw      string
		want     *Usage
		requests *int64
	}{
		{`{"prompt_tokens":0,"completion_tokens":0,"estimated":false}`, &Usage{Provenance: UsageMeasured}, nil},
		{`{"prompt_tokens":5,"completion_tokens":2,"estimated":true,"model_requests":1.5}`, &Usage{InputTokens: 5, OutputTokens: 2, Provenance: UsageEstimated}, nil},
		{`{"prompt_tokens":5,"completion_tokens":2,"model_requests":3}`, &Usage{InputTokens: 5, OutputTokens: 2, Provenance: UsageUnknown}, ptr(int64(3))},
		{`{"prompt_tokens":5,"estimated":false}`, nil, nil},
		{`{"prompt_tokens":-1,"completion_tokens":2}`, nil, nil},
	}
	for _, tt := range tests {
		u, req := usageFromChunk(json.RawMessage(tt.raw))
		if diff := cmp.Diff(tt.want, u); diff != "" {
			t.Errorf("usageFromChunk(%s) (-want +got):\n%s", tt.raw, diff)
		}
		if diff := cmp.Diff(tt.requests, req); diff != "" {
			t.Errorf("model requests of %s (-want +got):\n%s", tt.raw, diff)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestEnvironment_Run(t *testing.T) {
	f := newFake(t, loadTranscript(t, "legacy_ok.sse"))
	env := newEnv(t, f)
	ref := dispatch(t, env, "s1")
	// Another process: an environment of the same id, knowing only the
	// run id.
	other, err := f.provider(t).Get(t.Context(), env.ID(), GetOptions{Capabilities: env.Capabilities()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := other.Run(t.Context(), ref.RunID)
	if err != nil {
		t.Fatalf("Run(%s): %v", ref.RunID, err)
	}
	if got, ok := s.ControlRef(); !ok || got != ref || s.ID() != ref.SessionID {
		t.Errorf("Run(%s) controls %+v (session %s), want %+v", ref.RunID, got, s.ID(), ref)
	}
	var text string
	for ev, err := range s.Events(t.Context(), "0") {
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		text += ev.Delta
	}
	if text == "" {
		t.Error("the run's replay has no text")
	}

	var nf *NotFoundError
	if _, err := other.Run(t.Context(), "missing-run"); !errors.As(err, &nf) {
		t.Errorf("Run(missing-run) = %v, want *NotFoundError", err)
	}
	if _, err := other.Run(t.Context(), "-bad"); err == nil {
		t.Error("Run(-bad): no error")
	}
	// A run whose snapshot names another environment is not this one's.
	f.mu.Lock()
	f.snapshot = func(s *wire.RunSnapshot) { s.EnvironmentID = s.EnvironmentID + "x" }
	f.mu.Unlock()
	var im *IdentityMismatchError
	if _, err := other.Run(t.Context(), ref.RunID); !errors.As(err, &im) {
		t.Errorf("Run of another environment's run = %v, want *IdentityMismatchError", err)
	}
}
