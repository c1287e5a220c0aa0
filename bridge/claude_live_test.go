package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/server"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/npmtest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// claudeCodeSpec is the Claude Code release the live tests drive.
const claudeCodeSpec = "@anthropic-ai/claude-code@2.1.332"

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

type liveBridge struct {
	url string
	eng *engine.Engine
	st  *store.Store

	mu   sync.Mutex
	runs []string // run ids answered, for the leak check
}

// startLive runs the bridge in process with the real Claude Code CLI,
// pointed at a router stub; opts adjust the engine's options.
func startLive(t *testing.T, script routerstub.Script, opts ...func(*engine.Options)) (*liveBridge, *routerstub.Server, string) {
	t.Helper()
	env := testbed.Require(t)
	pkg := npmtest.Install(t, env, claudeCodeSpec)
	key := "sk-router-" + randHex(24)
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: script, ServedModel: "router-served-model"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stub)
	// A stalled answer holds its connection open after the CLI is gone.
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })

	data := t.TempDir()
	st, err := store.Open(context.Background(), data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &liveBridge{st: st}
	// Runs after the engine closed: no run may leave a process behind.
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		assertGroupsGone(t, st, b.runs)
	})
	eo := engine.Options{
		DataDir: data, RouterURL: hs.URL, RouterKey: key, KillGrace: time.Second,
		Environ: []string{"PATH=" + pkg.PATH(), "HOME=" + t.TempDir()},
	}
	for _, o := range opts {
		o(&eo)
	}
	eng, err := engine.New(context.Background(), st, eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		eng.Close(ctx)
	})
	srv, err := server.New(server.Options{Engine: eng, Bearer: "live-bearer",
		Backends: []*engine.Backend{{Adapter: claude.Adapter{}, Bin: pkg.Bin("claude"), Timeout: 3 * time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	bs := httptest.NewServer(srv)
	t.Cleanup(bs.Close)
	b.url, b.eng = bs.URL, eng
	return b, stub, key
}

func (b *liveBridge) do(t *testing.T, method, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, b.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer live-bearer")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if id := resp.Header.Get(wire.HeaderRunID); id != "" {
		b.mu.Lock()
		b.runs = append(b.runs, id)
		b.mu.Unlock()
	}
	return resp
}

// assertGroupsGone fails for every process left in the process group of
// the runs ids, and kills it.
func assertGroupsGone(t *testing.T, st *store.Store, ids []string) {
	t.Helper()
	for _, id := range ids {
		run, err := st.GetRun(context.Background(), id)
		if err != nil || run.PGID == 0 {
			continue
		}
		if left := harnesstest.GroupMembers(run.PGID); len(left) > 0 {
			t.Errorf("run %s left processes %v in its group %d", id, left, run.PGID)
			syscall.Kill(-run.PGID, syscall.SIGKILL)
		}
	}
}

// TestLive_ClaudeCode drives a streaming turn through the bridge and the
// real Claude Code CLI: a tool call (denied: -p mode has no permission to
// run Bash), its result, then the scripted text in deltas; then replays it.
func TestLive_ClaudeCode(t *testing.T) {
	want := "bridge reached the stub " + randHex(6)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.Text("Checking."),
			routerstub.ToolCall("Bash", `{"command":"echo hi","description":"Say hi"}`)),
	).AfterTool(routerstub.Deltas(want, 7))
	b, stub, key := startLive(t, script)

	body := `{"model":"claude-code/claude-sonnet-4-5","stream":true,"run_id":"live-1","messages":[{"role":"user","content":"Say hi with Bash, then say something."}]}`
	resp := b.do(t, "POST", "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	frames, done := readFrames(t, resp.Body, 1<<20)
	if !done {
		t.Fatalf("stream ended without [DONE]: %q", frames)
	}
	var text string
	var toolCall, toolResult bool
	var last wire.Chunk
	for _, f := range frames {
		_, data, _ := strings.Cut(f, "|")
		var c wire.Chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != wire.ChunkObject {
			t.Fatalf("frame %q is not a chunk (%v)", f, err)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				toolCall = toolCall || tc.Function.Name == "Bash"
			}
			toolResult = toolResult || len(ch.Delta.ToolResults) > 0
		}
		last = c
	}
	if !strings.Contains(text, want) {
		t.Errorf("streamed text = %q, want it to contain %q", text, want)
	}
	if !toolCall || !toolResult {
		t.Errorf("tool call seen %v, tool result seen %v, want both", toolCall, toolResult)
	}
	if len(last.Choices) != 1 || last.Choices[0].FinishReason == nil || *last.Choices[0].FinishReason != wire.FinishStop {
		t.Errorf("terminal chunk = %+v, want finish_reason stop", last)
	}
	u := last.Usage
	if u == nil || u.Estimated == nil || *u.Estimated || u.PromptTokens <= 0 || u.CompletionTokens <= 0 ||
		u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("terminal usage = %+v, want measured (estimated:false) with real totals", u)
	}
	if diff := cmp.Diff([]string{"router-served-model"}, last.ProviderModels); diff != "" {
		t.Errorf("provider_models (-want +got):\n%s", diff)
	}
	models := 0
	for _, r := range stub.Requests() {
		if r.Family == routerstub.FamilyNone {
			continue
		}
		models++
		if !r.Authorized || r.Key != key || r.AuthKind != routerstub.AuthBearer {
			t.Errorf("stub request %d %s: auth %s authorized %v, want the router key as a bearer token", r.Seq, r.Path, r.AuthKind, r.Authorized)
		}
	}
	if models < 2 {
		t.Errorf("model requests = %d, want at least 2 (tool call, then text)", models)
	}

	replay := b.do(t, "GET", "/v1/runs/live-1/events", "", wire.HeaderLastEventID, "3")
	again, done := readFrames(t, replay.Body, 1<<20)
	if diff := cmp.Diff(frames[3:], again); diff != "" || !done {
		t.Errorf("replay after 3 (-want +got):\n%s", diff)
	}
}

// TestLive_ClaudeCodeCancel cancels a real Claude Code turn that waits on a
// stalled model answer and checks its whole process group is gone.
func TestLive_ClaudeCodeCancel(t *testing.T) {
	b, stub, _ := startLive(t, routerstub.NewQueue(routerstub.Stall(time.Minute)))
	body := `{"model":"claude-code","stream":true,"run_id":"live-2","messages":[{"role":"user","content":"Wait."}]}`
	resp := b.do(t, "POST", "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	polltest.Until(t, time.Minute, "the turn's model call to reach the stub", func() bool { return len(stub.Requests()) > 0 })
	run, err := b.st.GetRun(t.Context(), "live-2")
	if err != nil || run.PGID == 0 {
		t.Fatalf("run = %+v, %v, want a recorded process group", run, err)
	}
	members := harnesstest.GroupMembers(run.PGID)
	if len(members) == 0 {
		t.Fatalf("no process in group %d while the turn waits on the model", run.PGID)
	}
	cr := b.do(t, "POST", "/v1/runs/live-2/cancel", "")
	var got wire.CancelResponse
	json.NewDecoder(cr.Body).Decode(&got)
	if cr.StatusCode != 200 || !got.Cancelled || !got.Terminal {
		t.Fatalf("cancel = %d %+v", cr.StatusCode, got)
	}
	if left := harnesstest.GroupMembers(run.PGID); len(left) > 0 {
		t.Errorf("processes %v of group %d (had %v) survived the cancel", left, run.PGID, members)
	}
	frames, done := readFrames(t, resp.Body, 1<<20)
	if !done || len(frames) == 0 || !strings.Contains(frames[len(frames)-1], wire.TypeRunCancelled) {
		t.Errorf("stream after cancel = %q, done %v, want a run_cancelled frame and [DONE]", frames, done)
	}
}
