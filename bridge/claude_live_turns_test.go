package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/npmtest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// lastBytes is the end of s, at most n bytes.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// TestLive_ClaudeCodeNonStreaming answers a real Claude Code turn as one
// chat.completion.
func TestLive_ClaudeCodeNonStreaming(t *testing.T) {
	want := "whole answer " + randHex(6)
	b, _, _ := startLive(t, routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Deltas(want, 5)))
	resp := b.do(t, "POST", "/v1/chat/completions",
		`{"model":"claude-code/claude-sonnet-4-5","run_id":"live-flat","messages":[{"role":"user","content":"Answer in one go."}]}`)
	var c wire.Completion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST = %d, decode: %v", resp.StatusCode, err)
	}
	if c.Object != wire.CompletionObject || len(c.Choices) != 1 || c.Error != nil {
		t.Fatalf("completion = %+v", c)
	}
	ch := c.Choices[0]
	if ch.Message.Content != want || ch.Message.Role != "assistant" || ch.FinishReason != wire.FinishStop {
		t.Errorf("choice = %+v, want content %q and finish stop", ch, want)
	}
	if u := c.Usage; u == nil || u.Estimated == nil || *u.Estimated || u.PromptTokens <= 0 || u.CompletionTokens <= 0 {
		t.Errorf("usage = %+v, want measured", u)
	}
	if diff := cmp.Diff([]string{"router-served-model"}, c.ProviderModels); diff != "" {
		t.Errorf("provider_models (-want +got):\n%s", diff)
	}
	run, err := b.st.GetRun(t.Context(), "live-flat")
	if err != nil || run.Status != store.StatusDone {
		t.Errorf("run = %+v, %v, want done", run, err)
	}
}

// TestLive_ClaudeCodeResume runs two turns under one session id: the second
// continues the CLI's own conversation (--resume), so its model request
// carries the first turn's prompt and answer although the caller sent
// only the new message.
func TestLive_ClaudeCodeResume(t *testing.T) {
	word := "quokka-" + randHex(4)
	answer1 := "I will remember " + word + "."
	answer2 := "The word was " + word + "."
	b, stub, _ := startLive(t, routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Text(answer1), routerstub.Text(answer2)))
	turn := func(runID, prompt string) wire.Completion {
		t.Helper()
		body := fmt.Sprintf(`{"model":"claude-code","run_id":%q,"session_id":"resume-session","messages":[{"role":"user","content":%q}]}`, runID, prompt)
		resp := b.do(t, "POST", "/v1/chat/completions", body)
		var c wire.Completion
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || c.Error != nil {
			t.Fatalf("turn %s = %d %+v (%v)", runID, resp.StatusCode, c, err)
		}
		if got := resp.Header.Get(wire.HeaderRunSessionID); got != "resume-session" {
			t.Errorf("turn %s session header = %q", runID, got)
		}
		return c
	}
	prompt1 := "Remember the word " + word + "."
	if c := turn("resume-1", prompt1); c.Choices[0].Message.Content != answer1 {
		t.Fatalf("turn 1 content = %q, want %q", c.Choices[0].Message.Content, answer1)
	}
	first := len(stub.Requests())
	prompt2 := "Which word did I ask you to remember?"
	if c := turn("resume-2", prompt2); c.Choices[0].Message.Content != answer2 {
		t.Fatalf("turn 2 content = %q, want %q", c.Choices[0].Message.Content, answer2)
	}
	reqs := harnesstest.MainRequests(stub, first)
	if len(reqs) == 0 {
		t.Fatal("no model request of turn 2 was recorded")
	}
	last := reqs[len(reqs)-1]
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(last.Body, &body); err != nil {
		t.Fatalf("turn 2 model request body: %v", err)
	}
	var convo []string
	for _, m := range body.Messages {
		convo = append(convo, m.Role+": "+wire.ContentText(m.Content))
	}
	joined := strings.Join(convo, "\n")
	for _, want := range []string{prompt1, answer1, prompt2} {
		if !strings.Contains(joined, want) {
			t.Errorf("turn 2 model request lacks %q; its %d messages end with:\n%s", want, len(convo), lastBytes(joined, 1500))
		}
	}
	if i1, i2 := strings.Index(joined, prompt1), strings.Index(joined, prompt2); i1 > i2 {
		t.Errorf("turn 2 model request has the new prompt before the first one; it ends with:\n%s", lastBytes(joined, 1500))
	}
}

// TestLive_ClaudeCodeModelError scripts the model call to fail: the run
// ends error with the model API's message surfaced, on the stream and in
// the snapshot, and nothing hangs.
func TestLive_ClaudeCodeModelError(t *testing.T) {
	msg := "scripted upstream failure " + randHex(4)
	b, stub, _ := startLive(t, routerstub.NewQueue(routerstub.Error(400, msg)))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	resp := b.do(t, "POST", "/v1/chat/completions",
		`{"model":"claude-code","stream":true,"run_id":"live-fail","messages":[{"role":"user","content":"This will fail."}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	frames, done := readFrames(t, resp.Body, 1<<20)
	if ctx.Err() != nil {
		t.Fatal("the failed turn did not end in time")
	}
	if !done || len(frames) == 0 {
		t.Fatalf("stream = %q done %v, want an error frame and [DONE]", frames, done)
	}
	_, data, _ := strings.Cut(frames[len(frames)-1], "|")
	var e wire.ErrorResponse
	if err := json.Unmarshal([]byte(data), &e); err != nil || e.Error.Type != wire.TypeHarnessError || !strings.Contains(e.Error.Message, msg) {
		t.Errorf("last frame = %s, want a harness_error naming %q", data, msg)
	}
	if len(harnesstest.MainRequests(stub, 0)) == 0 {
		t.Error("the CLI never called the model")
	}
	sresp := b.do(t, "GET", "/v1/runs/live-fail?wait_ms=5000", "")
	var snap wire.RunSnapshot
	json.NewDecoder(sresp.Body).Decode(&snap)
	if snap.Status != wire.StatusError || !snap.Terminal || snap.Error == nil || !strings.Contains(snap.Error.Message, msg) {
		t.Errorf("snapshot = %+v, want terminal error naming the model failure", snap)
	}
}

// TestLive_ClaudeCodeReplayAfterKill runs a real Claude Code turn in the
// box-bridge binary, replays it from several cursors, kills the bridge
// with SIGKILL, restarts it on the same data directory and replays it
// again: every replay is the same suffix of the original stream.
func TestLive_ClaudeCodeReplayAfterKill(t *testing.T) {
	env := testbed.Require(t)
	pkg := npmtest.Install(t, env, claudeCodeSpec)
	key := "sk-router-" + randHex(24)
	want := "durable answer " + randHex(6)
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, ServedModel: "router-served-model", Script: routerstub.NewQueue(routerstub.Text("unexpected extra call"), routerstub.Deltas(want, 9))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stub)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	data := t.TempDir()
	procEnv := []string{"CLAUDE_BIN=" + pkg.Bin("claude"), "TANGLE_ROUTER_URL=" + hs.URL, "TANGLE_API_KEY=" + key,
		"PATH=" + pkg.PATH(), "HOME=" + t.TempDir()}
	ctx := t.Context()

	b1 := startBridge(t, data, procEnv...)
	resp := b1.req(t, ctx, "POST", "/v1/chat/completions",
		`{"model":"claude-code","stream":true,"run_id":"live-durable","messages":[{"role":"user","content":"Say it."}]}`)
	digest := resp.Header.Get(wire.HeaderRunRequestDigest)
	frames, done := readFrames(t, resp.Body, 1<<20)
	resp.Body.Close()
	if resp.StatusCode != 200 || !done || len(frames) < 3 {
		t.Fatalf("POST = %d, %d frames, done %v", resp.StatusCode, len(frames), done)
	}
	var text string
	for _, f := range frames {
		_, d, _ := strings.Cut(f, "|")
		var c wire.Chunk
		json.Unmarshal([]byte(d), &c)
		for _, ch := range c.Choices {
			text += ch.Delta.Content
		}
	}
	if text != want {
		t.Fatalf("streamed text = %q, want %q", text, want)
	}
	n := len(frames)
	cursors := []int{0, 1, n / 2, n - 1, n}
	replayAll := func(p *bridgeProc, when string) {
		t.Helper()
		for _, c := range cursors {
			r := p.req(t, ctx, "GET", "/v1/runs/live-durable/events", "", wire.HeaderLastEventID, fmt.Sprint(c))
			got, done := readFrames(t, r.Body, 1<<20)
			r.Body.Close()
			if r.StatusCode != 200 || !done {
				t.Errorf("%s: replay after %d = %d, done %v", when, c, r.StatusCode, done)
				continue
			}
			if diff := cmp.Diff(frames[c:], got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: replay after %d (-want +got):\n%s", when, c, diff)
			}
		}
		r := p.req(t, ctx, "GET", "/v1/runs/live-durable/events", "", wire.HeaderLastEventID, fmt.Sprint(n+1))
		var e wire.ErrorResponse
		json.NewDecoder(r.Body).Decode(&e)
		r.Body.Close()
		if r.StatusCode != 409 || e.Error.Type != wire.TypeInvalidReplayCursor || e.Error.LastEventID == nil || *e.Error.LastEventID != int64(n) {
			t.Errorf("%s: cursor ahead = %d %+v, want 409 invalid_replay_cursor with last_event_id %d", when, r.StatusCode, e.Error, n)
		}
	}
	replayAll(b1, "before the kill")

	b1.Kill() // SIGKILL: no shutdown code runs
	b2 := startBridge(t, data, procEnv...)
	sresp := b2.req(t, ctx, "GET", "/v1/runs/live-durable", "")
	var snap wire.RunSnapshot
	json.NewDecoder(sresp.Body).Decode(&snap)
	sresp.Body.Close()
	if snap.Status != wire.StatusDone || !snap.Terminal || snap.LastSeq != int64(n) || snap.RequestDigest != digest || snap.Error != nil {
		t.Errorf("snapshot after the restart = %+v, want the finished run unchanged", snap)
	}
	replayAll(b2, "after the restart")

	b2.Kill()
	st, err := store.Open(context.Background(), data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	assertGroupsGone(t, st, []string{"live-durable"})
}
