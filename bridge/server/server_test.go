package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

const bearer = "test-bearer-token"

type env struct {
	url string
	e   *engine.Engine
	dir string
	srv *Server
}

type config struct {
	engine engine.Options
	server Options
	store  store.Options
	bin    string
	// prepare, when set, is given the store before the engine opens it.
	prepare func(*store.Store)
}

func newEnv(t *testing.T, cfg config) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "data"), cfg.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if cfg.prepare != nil {
		cfg.prepare(st)
	}
	cfg.engine.DataDir = filepath.Join(dir, "data")
	e, err := engine.New(context.Background(), st, cfg.engine)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
	})
	bin := cfg.bin
	if bin == "" {
		bin = bridgetest.FakeClaude(t)
	}
	cfg.server.Engine = e
	if cfg.server.DataDir == "" {
		cfg.server.DataDir = filepath.Join(dir, "data")
	}
	cfg.server.Backends = []*engine.Backend{{Adapter: claude.Adapter{}, Bin: bin}}
	cfg.server.Bearer = bearer
	cfg.server.Version = "test"
	s, err := New(cfg.server)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(checked(t, s))
	t.Cleanup(ts.Close)
	return &env{url: ts.URL, e: e, dir: dir, srv: s}
}

func (v *env) do(t *testing.T, method, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, v.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func chatBody(runID, prompt string, stream bool, extra ...string) string {
	b := fmt.Sprintf(`{"model":"claude-code/sonnet","stream":%v,"messages":[{"role":"user","content":%q}]`, stream, prompt)
	if runID != "" {
		b += fmt.Sprintf(`,"run_id":%q`, runID)
	}
	for _, e := range extra {
		b += "," + e
	}
	return b + "}"
}

type frame struct {
	id   int64
	data string
}

type sse struct {
	frames   []frame
	comments []string
	done     bool
}

func readSSE(t *testing.T, r io.Reader) sse {
	t.Helper()
	var out sse
	var cur frame
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				if cur.data == wire.DoneData {
					out.done = true
				} else {
					out.frames = append(out.frames, cur)
				}
			}
			cur = frame{}
		case strings.HasPrefix(line, ":"):
			out.comments = append(out.comments, strings.TrimSpace(line[1:]))
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		case strings.HasPrefix(line, "event:"):
			t.Errorf("legacy stream has an event: line %q", line)
		}
	}
	return out
}

func text(t *testing.T, frames []frame) string {
	t.Helper()
	var s string
	for _, f := range frames {
		var c wire.Chunk
		json.Unmarshal([]byte(f.data), &c)
		for _, ch := range c.Choices {
			s += ch.Delta.Content
		}
	}
	return s
}

func decode[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	return v
}

func TestChat_StreamAndReplay(t *testing.T) {
	v := newEnv(t, config{})
	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("run-1", "hello", true,
		`"provider":"docker","environment_id":"env-1","execution_id":"exec-1","session_id":"ses-1"`))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("POST stream = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	wantHdr := map[string]string{wire.HeaderRunID: "run-1", wire.HeaderRunProvider: "docker",
		wire.HeaderRunEnvironmentID: "env-1", wire.HeaderRunExecutionID: "exec-1", wire.HeaderRunSessionID: "ses-1"}
	for k, want := range wantHdr {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	digest := resp.Header.Get(wire.HeaderRunRequestDigest)
	if !strings.HasPrefix(digest, "sha256:") {
		t.Errorf("digest header = %q", digest)
	}
	s := readSSE(t, resp.Body)
	if len(s.comments) == 0 || s.comments[0] != "connected" || !s.done {
		t.Fatalf("stream comments %q done %v, want connected first and [DONE]", s.comments, s.done)
	}
	for i, f := range s.frames {
		if f.id != int64(i+1) {
			t.Fatalf("frame %d id = %d, want %d", i, f.id, i+1)
		}
	}
	if got := text(t, s.frames); got != "Hello, world" {
		t.Errorf("text = %q", got)
	}
	var last wire.Chunk
	json.Unmarshal([]byte(s.frames[len(s.frames)-1].data), &last)
	if last.Usage == nil || last.Usage.Estimated == nil || *last.Usage.Estimated || last.Usage.CompletionTokens != 7 {
		t.Errorf("terminal usage = %+v, want measured", last.Usage)
	}
	if diff := cmp.Diff([]string{"fake-model-1"}, last.ProviderModels); diff != "" {
		t.Errorf("provider_models (-want +got):\n%s", diff)
	}

	t.Run("replay from cursor", func(t *testing.T) {
		resp := v.do(t, "GET", "/v1/runs/run-1/events", "", wire.HeaderLastEventID, "2")
		if resp.StatusCode != 200 || resp.Header.Get(wire.HeaderRunRequestDigest) != digest {
			t.Fatalf("GET events = %d", resp.StatusCode)
		}
		r := readSSE(t, resp.Body)
		if diff := cmp.Diff(s.frames[2:], r.frames, cmp.AllowUnexported(frame{})); diff != "" || !r.done {
			t.Errorf("replay after 2 (-want +got):\n%s", diff)
		}
	})
	t.Run("identical retry attaches and replays", func(t *testing.T) {
		resp := v.do(t, "POST", "/v1/chat/completions", chatBody("run-1", "hello", true,
			`"provider":"docker","environment_id":"env-1","execution_id":"exec-1","session_id":"ses-1"`), wire.HeaderXLastEventID, "1")
		r := readSSE(t, resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get(wire.HeaderRunRequestDigest) != digest {
			t.Fatalf("retry = %d digest %q", resp.StatusCode, resp.Header.Get(wire.HeaderRunRequestDigest))
		}
		if diff := cmp.Diff(s.frames[1:], r.frames, cmp.AllowUnexported(frame{})); diff != "" {
			t.Errorf("retry replay (-want +got):\n%s", diff)
		}
	})
	t.Run("different request under the same id", func(t *testing.T) {
		resp := v.do(t, "POST", "/v1/chat/completions", chatBody("run-1", "other", true))
		e := decode[wire.ErrorResponse](t, resp)
		if resp.StatusCode != 409 || e.Error.Type != wire.TypeRunIdentityConflict {
			t.Errorf("conflict = %d %+v", resp.StatusCode, e.Error)
		}
	})
	t.Run("the same job under other run ids has the same digest", func(t *testing.T) {
		// As in the TypeScript bridge, the run id names the run; it is not
		// part of the job the digest binds it to.
		for _, tc := range []struct {
			name, body string
			header     []string
		}{
			{"run_id run-2", chatBody("run-2", "hello", true,
				`"provider":"docker","environment_id":"env-1","execution_id":"exec-1","session_id":"ses-1"`), nil},
			{"X-Run-Id run-3", chatBody("", "hello", true,
				`"provider":"docker","environment_id":"env-1","execution_id":"exec-1","session_id":"ses-1"`), []string{wire.HeaderRunID, "run-3"}},
		} {
			resp := v.do(t, "POST", "/v1/chat/completions", tc.body, tc.header...)
			readSSE(t, resp.Body)
			if got := resp.Header.Get(wire.HeaderRunRequestDigest); resp.StatusCode != 200 || got != digest {
				t.Errorf("%s: POST = %d digest %q, want 200 %q (run-1's)", tc.name, resp.StatusCode, got, digest)
			}
		}
	})
	t.Run("snapshot", func(t *testing.T) {
		resp := v.do(t, "GET", "/v1/runs/run-1?wait_ms=1000", "")
		snap := decode[wire.RunSnapshot](t, resp)
		if snap.Status != wire.StatusDone || snap.State != wire.StateTerminal || !snap.Terminal ||
			snap.LastSeq != int64(len(s.frames)) || snap.RequestDigest != digest || snap.Replay.FirstAvailableSeq != 1 ||
			snap.Replay.ExpiresAt == nil || snap.EndedAt == nil || snap.SessionID != "ses-1" || snap.Provider != "docker" {
			t.Errorf("snapshot = %+v", snap)
		}
		if resp.Header.Get(wire.HeaderRunTerminal) != "true" || resp.Header.Get(wire.HeaderRunExecutionID) != "exec-1" {
			t.Errorf("snapshot headers = %v", resp.Header)
		}
	})
	t.Run("cursor errors", func(t *testing.T) {
		resp := v.do(t, "GET", "/v1/runs/run-1/events", "", wire.HeaderLastEventID, "999")
		e := decode[wire.ErrorResponse](t, resp)
		if resp.StatusCode != 409 || e.Error.Type != wire.TypeInvalidReplayCursor || e.Error.RunID != "run-1" || e.Error.Status != 409 ||
			*e.Error.RequestedEventID != 999 || *e.Error.LastEventID != int64(len(s.frames)) || *e.Error.FirstAvailableEventID != 1 {
			t.Errorf("cursor ahead = %d %+v", resp.StatusCode, e.Error)
		}
		resp = v.do(t, "GET", "/v1/runs/run-1/events", "", wire.HeaderLastEventID, "1", wire.HeaderXLastEventID, "2")
		if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 400 || e.Error.Type != wire.TypeInvalidRequest {
			t.Errorf("disagreeing cursors = %d %+v", resp.StatusCode, e.Error)
		}
	})
}

func TestChat_NonStreaming(t *testing.T) {
	v := newEnv(t, config{})
	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("", "hello", false))
	c := decode[wire.Completion](t, resp)
	if resp.StatusCode != 200 || c.Choices[0].Message.Content != "Hello, world" || c.Choices[0].FinishReason != "stop" ||
		c.Usage == nil || c.Usage.TotalTokens != 22 || len(c.ProviderModels) != 1 || c.Error != nil {
		t.Errorf("completion = %d %+v", resp.StatusCode, c)
	}
	if id := resp.Header.Get(wire.HeaderRunID); wire.ValidRunID(id) != nil || resp.Header.Get(wire.HeaderRunSessionID) == "" {
		t.Errorf("generated run id %q or session id missing", id)
	}
	// The bridge prices nothing: the cost is unknown, the usage the turn's
	// total.
	if u := c.Usage; u != nil && (u.CostKnown || u.Cost != nil || u.CostProvenance != "" || u.CostScope != wire.CostScopeTotal) {
		t.Errorf("usage cost = known %v cost %v provenance %q scope %q, want unknown cost of the total", u.CostKnown, u.Cost,
			u.CostProvenance, u.CostScope)
	}
	if m := resp.Header.Get(wire.HeaderBridgeMode); m != wire.ModeBYOB {
		t.Errorf("%s = %q, want %s", wire.HeaderBridgeMode, m, wire.ModeBYOB)
	}
	resp = v.do(t, "POST", "/v1/chat/completions", chatBody("", "crash", false))
	c = decode[wire.Completion](t, resp)
	if c.Error == nil || c.Error.Type != wire.TypeHarnessError || c.Choices[0].FinishReason != "error" {
		t.Errorf("crash completion = %+v", c)
	}
}

func TestExpiredCursor(t *testing.T) {
	v := newEnv(t, config{store: store.Options{MaxEvents: 5}})
	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("r", "many:20", false))
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	resp = v.do(t, "GET", "/v1/runs/r/events", "")
	e := decode[wire.ErrorResponse](t, resp)
	if resp.StatusCode != 410 || e.Error.Type != wire.TypeExpiredReplayCursor || e.Error.Status != 410 || e.Error.RunID != "r" ||
		e.Error.RequestedEventID == nil || *e.Error.RequestedEventID != 0 || e.Error.FirstAvailableEventID == nil ||
		*e.Error.FirstAvailableEventID != 17 || e.Error.LastEventID == nil || *e.Error.LastEventID != 21 {
		t.Errorf("expired cursor = %d %+v", resp.StatusCode, e.Error)
	}
	resp = v.do(t, "GET", "/v1/runs/r/events", "", wire.HeaderLastEventID, "16")
	if s := readSSE(t, resp.Body); resp.StatusCode != 200 || len(s.frames) != 5 || s.frames[0].id != 17 {
		t.Errorf("cursor at the window edge = %d, %d frames", resp.StatusCode, len(s.frames))
	}
}

func TestBadInput(t *testing.T) {
	v := newEnv(t, config{server: Options{MaxBodyBytes: 4096}})
	tests := []struct {
		name, method, path, body string
		hdr                      []string
		wantStatus               int
		wantType                 string
	}{
		{"invalid json", "POST", "/v1/chat/completions", `{"model":`, nil, 400, wire.TypeInvalidRequest},
		{"not an object", "POST", "/v1/chat/completions", `[1]`, nil, 400, wire.TypeInvalidRequest},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"claude-code","messages":[]}`, nil, 400, wire.TypeInvalidRequest},
		{"bad role", "POST", "/v1/chat/completions", `{"model":"claude-code","messages":[{"role":"robot","content":"x"}]}`, nil, 400, wire.TypeInvalidRequest},
		{"wrong field type", "POST", "/v1/chat/completions", `{"model":"claude-code","stream":"yes","messages":[{"role":"user","content":"x"}]}`, nil, 400, wire.TypeInvalidRequest},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"x"}]}`, nil, 404, wire.TypeNotFound},
		{"bad run id", "POST", "/v1/chat/completions", chatBody("-bad", "hello", true), nil, 400, wire.TypeInvalidRequest},
		{"run id header disagrees", "POST", "/v1/chat/completions", chatBody("a", "hello", true), []string{wire.HeaderRunID, "b"}, 400, wire.TypeInvalidRequest},
		{"partial identity", "POST", "/v1/chat/completions", chatBody("a", "hello", true, `"provider":"docker"`), nil, 400, wire.TypeInvalidRequest},
		{"session header disagrees", "POST", "/v1/chat/completions", chatBody("a", "hello", true, `"session_id":"x"`), []string{wire.HeaderSessionID, "y"}, 400, wire.TypeInvalidRequest},
		{"relative cwd", "POST", "/v1/chat/completions", chatBody("a", "hello", true, `"cwd":"rel"`), nil, 400, wire.TypeInvalidRequest},
		{"unknown mode", "POST", "/v1/chat/completions", chatBody("a", "hello", true, `"mode":"yolo"`), nil, 400, wire.TypeInvalidRequest},
		{"hosted mode is not enforced", "POST", "/v1/chat/completions", chatBody("a", "hello", true), []string{wire.HeaderBridgeMode, "hosted-safe"}, 501, wire.TypeNotConfigured},
		{"sandbox header is not enforced", "POST", "/v1/chat/completions", chatBody("a", "hello", true), []string{wire.HeaderSandbox, "1"}, 501, wire.TypeNotConfigured},
		{"bad cursor", "POST", "/v1/chat/completions", chatBody("a", "hello", true), []string{wire.HeaderLastEventID, "x"}, 400, wire.TypeInvalidRequest},
		{"oversized body", "POST", "/v1/chat/completions", chatBody("a", strings.Repeat("x", 5000), true), nil, 413, wire.TypeRequestTooLarge},
		{"wrong bearer", "GET", "/v1/models", "", []string{"Authorization", "Bearer nope"}, 401, wire.TypeInvalidAuthentication},
		{"no bearer", "POST", "/v1/chat/completions", chatBody("a", "hello", true), []string{"Authorization", ""}, 401, wire.TypeInvalidAuthentication},
		{"unknown run", "GET", "/v1/runs/nope", "", nil, 404, wire.TypeNotFound},
		{"unknown run events", "GET", "/v1/runs/nope/events", "", nil, 404, wire.TypeNotFound},
		{"unknown run cancel", "POST", "/v1/runs/nope/cancel", "", nil, 404, wire.TypeNotFound},
		{"bad wait", "GET", "/v1/runs/nope?wait_ms=99999", "", nil, 400, wire.TypeInvalidRequest},
		{"bad cancel body", "POST", "/v1/runs/nope/cancel", "{", nil, 400, wire.TypeInvalidRequest},
		{"capabilities without model", "GET", "/v1/capabilities", "", nil, 400, wire.TypeInvalidRequest},
		{"capabilities unknown harness", "GET", "/v1/capabilities?model=nope/x", "", nil, 404, wire.TypeNotFound},
		{"unknown route", "GET", "/v2/nothing", "", nil, 404, wire.TypeNotFound},
		{"wrong method", "DELETE", "/v1/chat/completions", "", nil, 405, wire.TypeMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := v.do(t, tt.method, tt.path, tt.body, tt.hdr...)
			e := decode[wire.ErrorResponse](t, resp)
			if resp.StatusCode != tt.wantStatus || e.Error.Type != tt.wantType || e.Error.Message == "" {
				t.Errorf("%s %s = %d %+v, want %d %s", tt.method, tt.path, resp.StatusCode, e.Error, tt.wantStatus, tt.wantType)
			}
			if strings.Contains(e.Error.Message, bearer) {
				t.Error("the bearer leaked into an error")
			}
		})
	}
}

func TestHealthModelsCapabilities(t *testing.T) {
	v := newEnv(t, config{})
	for i, wantCached := range []bool{false, true} {
		resp := v.do(t, "GET", "/health", "", "Authorization", "")
		h := decode[wire.Health](t, resp)
		if resp.StatusCode != 200 || h.Status != "ok" || len(h.Backends) != 1 {
			t.Fatalf("health = %d %+v", resp.StatusCode, h)
		}
		b := h.Backends[0]
		if b.Name != "claude-code" || b.State != wire.BackendReady || b.Version != "9.9.9 (Claude Code)" || b.Cached != wantCached {
			t.Errorf("health[%d] backend = %+v, want ready, cached %v", i, b, wantCached)
		}
	}
	if h := decode[wire.Health](t, v.do(t, "GET", "/health?force=1", "")); h.Backends[0].Cached {
		t.Error("health?force=1 answered from the cache")
	}
	m := decode[wire.ModelList](t, v.do(t, "GET", "/v1/models", ""))
	if len(m.Data) == 0 || m.Data[1].ID != "claude-code/sonnet" {
		t.Errorf("models = %+v", m)
	}
	c := decode[wire.Capabilities](t, v.do(t, "GET", "/v1/capabilities?model=Claude-Code/opus", ""))
	if !c.Streaming.Replay || c.RetainedControl == nil || c.Interactions == nil {
		t.Errorf("capabilities = %+v", c)
	}
	root := decode[wire.Root](t, v.do(t, "GET", "/", ""))
	if root.Name != "box-bridge" || root.Version != "test" || len(root.Backends) != 1 {
		t.Errorf("root = %+v", root)
	}

	missing := newEnv(t, config{bin: "/nonexistent/claude"})
	resp := missing.do(t, "GET", "/health", "")
	h := decode[wire.Health](t, resp)
	if resp.StatusCode != 503 || h.Status != "degraded" || h.Backends[0].State != wire.BackendUnavailable {
		t.Errorf("health with a missing binary = %d %+v", resp.StatusCode, h)
	}
	resp = missing.do(t, "POST", "/v1/chat/completions", chatBody("x", "hello", true))
	if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 503 || e.Error.Type != wire.TypeBackendNotReady {
		t.Errorf("chat with a missing binary = %d %+v", resp.StatusCode, e.Error)
	}
}
