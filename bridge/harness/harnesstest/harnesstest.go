package harnesstest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/server"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/npmtest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// Bearer is the bridge bearer token of a Live.
const Bearer = "live-bearer"

// Config says which harness a Live runs.
type Config struct {
	Adapter harness.Adapter
	// Spec is the npm package at an exact version ("@openai/codex@0.171.0").
	Spec string
	// Pkg, when set, is Spec already installed (see Install), so that the
	// tests of a package install a large CLI once.
	Pkg *npmtest.Package
	// Bin is the executable the package installs ("codex").
	Bin string
	// Script answers the harness's model requests.
	Script routerstub.Script
	// ServedModel is the model every stub answer names.
	ServedModel string
	// Timeout bounds one turn (default 3 minutes).
	Timeout time.Duration
	// RouterURL, when set, replaces the stub's URL as the router the
	// harness is pointed at (an endpoint that does not answer, say).
	RouterURL string
	// SessionIdleTimeout is the engine's SessionIdleTimeout (0 for its
	// default, negative for a fresh process per retained turn).
	SessionIdleTimeout time.Duration
	// Spares is the engine's Spares: harness processes started ahead of
	// the turns likely next.
	Spares bool
}

// Live is a running bridge with one real harness.
type Live struct {
	URL    string
	Stub   *routerstub.Server
	Key    string
	Pkg    npmtest.Package
	Store  *store.Store
	Engine *engine.Engine
	// Work is the working directory turns run in.
	Work string
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Install installs spec (an exact npm version) with the test bed's Node
// and npm cache; the installation lasts as long as t.
func Install(t testing.TB, spec string) npmtest.Package {
	t.Helper()
	return npmtest.Install(t, testbed.Require(t), spec)
}

// Start installs the CLI (unless c.Pkg is set) and starts a bridge with it.
func Start(t *testing.T, c Config) *Live {
	t.Helper()
	var pkg npmtest.Package
	if c.Pkg != nil {
		pkg = *c.Pkg
	} else {
		pkg = Install(t, c.Spec)
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Minute
	}
	key := "sk-router-" + RandomHex(24)
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: c.Script, ServedModel: c.ServedModel})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stub)
	// A stalled answer holds its connection open after the CLI is gone.
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, r := range stub.Requests() {
			t.Logf("stub request %d: %s %s?%s family=%s model=%s stream=%v auth=%s authorized=%v tools=%d tool_result=%v side=%v reply=%s status=%d ua=%q",
				r.Seq, r.Method, r.Path, r.Query, r.Family, r.Model, r.Stream, r.AuthKind, r.Authorized,
				r.Tools, r.ToolResult, r.Side, r.Reply, r.Status, r.UserAgent)
		}
	})

	data := t.TempDir()
	st, err := store.Open(context.Background(), data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	home := t.TempDir()
	router := hs.URL
	if c.RouterURL != "" {
		router = c.RouterURL
	}
	eng, err := engine.New(context.Background(), st, engine.Options{
		DataDir: data, RouterURL: router, RouterKey: key, KillGrace: time.Second, SessionIdleTimeout: c.SessionIdleTimeout, Spares: c.Spares,
		Environ: []string{"PATH=" + pkg.PATH(), "HOME=" + home},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		eng.Close(ctx)
	})
	srv, err := server.New(server.Options{Engine: eng, Bearer: Bearer,
		ProbeEnv: []string{"PATH=" + pkg.PATH(), "HOME=" + home},
		Backends: []*engine.Backend{{Adapter: c.Adapter, Bin: pkg.Bin(c.Bin), Timeout: c.Timeout}}})
	if err != nil {
		t.Fatal(err)
	}
	bs := httptest.NewServer(srv)
	t.Cleanup(bs.Close)
	return &Live{URL: bs.URL, Stub: stub, Key: key, Pkg: pkg, Store: st, Engine: eng, Work: t.TempDir()}
}

// Do sends an authorized request to the bridge.
func (l *Live) Do(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, l.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+Bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Health returns the bridge's GET /health?force=1.
func (l *Live) Health(t *testing.T) wire.Health {
	t.Helper()
	resp := l.Do(t, "GET", "/health?force=1", "")
	var h wire.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("decode /health: %v", err)
	}
	return h
}

// Turn is a decoded streaming answer.
type Turn struct {
	// Frames are the data frames before [DONE], as "id|data".
	Frames []string
	// Done reports the stream ended with [DONE].
	Done bool
	// Text and Reasoning concatenate the deltas; TextDeltas counts the
	// chunks that carried text.
	Text, Reasoning string
	TextDeltas      int
	ToolCalls       []wire.ToolCall
	ToolResults     []wire.ToolResult
	// Finish is the terminal chunk's finish reason ("" if none).
	Finish         string
	Usage          *wire.Usage
	ProviderModels []string
	// Err is an error frame's body.
	Err *wire.ErrorBody
	// Header is the response header.
	Header http.Header
}

// Chat posts one streaming turn with the given ids (sessionID may be "")
// and reads its stream to the end.
func (l *Live) Chat(t *testing.T, runID, sessionID, model, prompt string) Turn {
	t.Helper()
	body := map[string]any{"model": model, "stream": true, "run_id": runID, "cwd": l.Work,
		"messages": []map[string]string{{"role": "user", "content": prompt}}}
	if sessionID != "" {
		body["session_id"] = sessionID
	}
	b, _ := json.Marshal(body)
	start := time.Now()
	resp := l.Do(t, "POST", "/v1/chat/completions", string(b))
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/chat/completions = %d: %s", resp.StatusCode, msg)
	}
	turn := Read(t, resp.Body)
	turn.Header = resp.Header
	t.Logf("turn %s (%s) took %s: %d text deltas, finish %q, usage %s, provider models %v",
		runID, model, time.Since(start).Round(time.Millisecond), turn.TextDeltas, turn.Finish, usageString(turn.Usage), turn.ProviderModels)
	return turn
}

func usageString(u *wire.Usage) string {
	if u == nil {
		return "none"
	}
	b, _ := json.Marshal(u)
	return string(b)
}

// Read decodes a legacy SSE stream.
func Read(t *testing.T, r io.Reader) Turn {
	t.Helper()
	var turn Turn
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	id := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case line == "data: [DONE]":
			turn.Done = true
			return turn
		case strings.HasPrefix(line, "data: "):
			data := line[6:]
			turn.Frames = append(turn.Frames, id+"|"+data)
			turn.add(t, data)
		}
	}
	return turn
}

func (turn *Turn) add(t *testing.T, data string) {
	var probe struct {
		Error *wire.ErrorBody `json:"error"`
	}
	if json.Unmarshal([]byte(data), &probe) == nil && probe.Error != nil {
		turn.Err = probe.Error
		return
	}
	var c wire.Chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != wire.ChunkObject {
		t.Errorf("frame %q is neither a chunk nor an error (%v)", data, err)
		return
	}
	for _, ch := range c.Choices {
		if ch.Delta.Content != "" {
			turn.Text += ch.Delta.Content
			turn.TextDeltas++
		}
		turn.Reasoning += ch.Delta.Reasoning
		turn.ToolCalls = append(turn.ToolCalls, ch.Delta.ToolCalls...)
		turn.ToolResults = append(turn.ToolResults, ch.Delta.ToolResults...)
		if ch.FinishReason != nil {
			turn.Finish = *ch.FinishReason
		}
	}
	if c.Usage != nil {
		turn.Usage = c.Usage
	}
	if len(c.ProviderModels) > 0 {
		turn.ProviderModels = c.ProviderModels
	}
}

// CheckMeasured fails t unless u is measured usage (estimated:false) with
// positive input and output whose total adds up.
func CheckMeasured(t *testing.T, u *wire.Usage) {
	t.Helper()
	if u == nil || u.Estimated == nil || *u.Estimated || u.PromptTokens <= 0 || u.CompletionTokens <= 0 ||
		u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("terminal usage = %s, want measured (estimated:false) with real totals", usageString(u))
	}
}

// ModelRequests are the stub's model requests, in order (the stub's
// other requests left out).
func (l *Live) ModelRequests() []routerstub.Request {
	var out []routerstub.Request
	for _, r := range l.Stub.Requests() {
		if r.Family != routerstub.FamilyNone {
			out = append(out, r)
		}
	}
	return out
}

// WaitModelRequests polls the stub until it has seen n model requests,
// failing t when within does not bring them.
func (l *Live) WaitModelRequests(t *testing.T, n int, within time.Duration) {
	t.Helper()
	polltest.UntilNil(t, within, fmt.Sprintf("%d model requests at the stub", n), func() error {
		if got := len(l.ModelRequests()); got < n {
			return fmt.Errorf("the stub saw %d", got)
		}
		return nil
	})
}

// StubUsage sums the usage the stub reported for model requests from
// request seq after (exclusive) on.
func (l *Live) StubUsage(after int) (in, out int64, requests int) {
	for _, r := range l.Stub.Requests() {
		if r.Seq <= after || r.Family == routerstub.FamilyNone || r.Status != http.StatusOK {
			continue
		}
		in += int64(r.Usage.InputTokens)
		out += int64(r.Usage.OutputTokens)
		requests++
	}
	return in, out, requests
}

// CheckKeyed fails t unless every model request presented the router key
// in the way kind says.
func (l *Live) CheckKeyed(t *testing.T, kind routerstub.AuthKind) {
	t.Helper()
	n := 0
	for _, r := range l.Stub.Requests() {
		if r.Family == routerstub.FamilyNone {
			continue
		}
		n++
		if !r.Authorized || r.Key != l.Key || r.AuthKind != kind {
			t.Errorf("stub request %d %s: auth %s authorized %v, want the router key as %s", r.Seq, r.Path, r.AuthKind, r.Authorized, kind)
		}
	}
	if n == 0 {
		t.Error("the harness made no model request to the stub")
	}
}

// String describes a turn for failure messages.
func (turn Turn) String() string {
	return fmt.Sprintf("text %q, finish %q, usage %s, provider models %v, error %+v, frames %d, done %v",
		turn.Text, turn.Finish, usageString(turn.Usage), turn.ProviderModels, turn.Err, len(turn.Frames), turn.Done)
}

// EnvMap turns an environment list ("NAME=value") into a map; a later
// entry for a name wins, as in a process environment.
func EnvMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
