package routerstub_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/npmtest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// The harness CLIs the live tests install, at exact versions.
const (
	claudeCodeSpec = "@anthropic-ai/claude-code@2.1.332"
	codexSpec      = "@openai/codex@0.171.0"
	piSpec         = "@earendil-works/pi-coding-agent@1.6.0"
)

// cliTimeout bounds one CLI run against the stub.
const cliTimeout = 3 * time.Minute

// randomHex returns n random bytes in hex.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// liveStub starts a stub on loopback configured by o (its keys only).
func liveStub(t *testing.T, o routerstub.Options) (*routerstub.Server, string) {
	t.Helper()
	srv, err := routerstub.New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		for _, r := range srv.Requests() {
			t.Logf("request %d: %s %s?%s family=%s model=%s stream=%v auth=%s authorized=%v tools=%d tool_result=%v side=%v reply=%s status=%d ua=%q",
				r.Seq, r.Method, r.Path, r.Query, r.Family, r.Model, r.Stream, r.AuthKind, r.Authorized,
				r.Tools, r.ToolResult, r.Side, r.Reply, r.Status, r.UserAgent)
		}
	})
	return srv, hs.URL
}

// runCLI runs bin in dir with exactly env (nothing inherited), stdin
// closed, and returns its stdout; it fails the test on a non-zero exit.
func runCLI(t *testing.T, dir string, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s ran in %s", filepath.Base(bin), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", bin, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// jsonLines decodes each JSON line of out into a map; other lines are
// skipped.
func jsonLines(out string) []map[string]any {
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// checkKeyed asserts every request reached a model API with key in the
// expected header, and that at least min model requests were made, one of
// them carrying a tool result.
func checkKeyed(t *testing.T, reqs []routerstub.Request, key string, kind routerstub.AuthKind, family routerstub.Family, min int) {
	t.Helper()
	models, toolResults := 0, 0
	for _, r := range reqs {
		if r.Family == routerstub.FamilyNone {
			continue // a probe of another path, e.g. HEAD /
		}
		if r.Key != key || r.AuthKind != kind || !r.Authorized {
			t.Errorf("request %d %s: auth %s authorized=%v key matches=%v, want %s with the router key",
				r.Seq, r.Path, r.AuthKind, r.Authorized, r.Key == key, kind)
		}
		if r.Family != family {
			t.Errorf("request %d %s: family %s, want %s", r.Seq, r.Path, r.Family, family)
		}
		if r.Status != 200 {
			t.Errorf("request %d %s: status %d, want 200", r.Seq, r.Path, r.Status)
		}
		models++
		if r.ToolResult {
			toolResults++
		}
	}
	if models < min || toolResults == 0 {
		t.Errorf("model requests = %d with %d carrying a tool result, want >= %d and >= 1", models, toolResults, min)
	}
}

// checkProof asserts the tool call really ran: it wrote want to dir/name.
func checkProof(t *testing.T, dir, name, want string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("the scripted shell command did not run: %v", err)
	}
	if strings.TrimSpace(string(got)) != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

// TestLive_ClaudeCode runs the real Claude Code CLI against the stub: the
// first model call answers with a Bash tool call, the call that carries its
// result with the scripted text in many deltas.
func TestLive_ClaudeCode(t *testing.T) {
	env := testbed.Require(t)
	pkg := npmtest.Install(t, env, claudeCodeSpec)
	key := "sk-router-" + randomHex(t, 24)
	want := "claude reached the stub " + randomHex(t, 6)
	proof := "proof-" + randomHex(t, 4)
	const served = "router-served-model"
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.Join(routerstub.Text("Writing the proof."),
			routerstub.ToolCall("Bash", `{"command":"echo `+proof+` > proof.txt","description":"Write the proof file"}`)),
	).AfterTool(routerstub.Deltas(want, 7))
	srv, url := liveStub(t, routerstub.Options{Keys: []string{key}, Script: script, ServedModel: served})

	home, work := t.TempDir(), t.TempDir()
	out := runCLI(t, work, []string{
		"PATH=" + pkg.PATH(), "HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=" + key,
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, pkg.Bin("claude"), "-p", "--output-format", "stream-json", "--verbose",
		"--model", "claude-sonnet-4-5", "--allowedTools", "Bash", "--", "Write the proof file, then say something.")

	var result map[string]any
	servedSeen := false
	for _, l := range jsonLines(out) {
		switch l["type"] {
		case "result":
			result = l
		case "assistant":
			msg, _ := l["message"].(map[string]any)
			servedSeen = servedSeen || msg["model"] == served
		}
	}
	if result == nil {
		t.Fatalf("claude printed no result line:\n%s", out)
	}
	if result["is_error"] != false || !strings.Contains(result["result"].(string), want) {
		t.Errorf("claude result is_error=%v result=%q, want no error and %q", result["is_error"], result["result"], want)
	}
	if !servedSeen {
		t.Errorf("no assistant message named the served model %q", served)
	}
	checkProof(t, work, "proof.txt", proof)
	reqs := srv.Requests()
	checkKeyed(t, reqs, key, routerstub.AuthAPIKey, routerstub.FamilyAnthropic, 2)
	// Claude Code reports the usage the stub measured, summed over the turn.
	var in, outTokens float64
	for _, r := range reqs {
		in += float64(r.Usage.InputTokens)
		outTokens += float64(r.Usage.OutputTokens)
	}
	if u := result["usage"]; get(u, "input_tokens") != in || get(u, "output_tokens") != outTokens {
		t.Errorf("claude result usage = %v, want input %v output %v as the stub measured", u, in, outTokens)
	}
	for _, r := range reqs {
		if r.Family == routerstub.FamilyAnthropic && (r.Query != "beta=true" || r.Model != "claude-sonnet-4-5" || !r.Stream) {
			t.Errorf("request %d: query %q model %q stream %v, want beta=true, claude-sonnet-4-5, streaming", r.Seq, r.Query, r.Model, r.Stream)
		}
	}
}

// TestLive_Codex runs the real Codex CLI against the stub over the
// Responses API: an exec_command tool call, then the scripted text.
func TestLive_Codex(t *testing.T) {
	env := testbed.Require(t)
	pkg := npmtest.Install(t, env, codexSpec)
	key := "sk-router-" + randomHex(t, 24)
	want := "codex reached the stub " + randomHex(t, 6)
	proof := "proof-" + randomHex(t, 4)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.ToolCall("exec_command", `{"cmd":"echo `+proof+` > proof.txt"}`),
	).AfterTool(routerstub.Deltas(want, 7))
	srv, url := liveStub(t, routerstub.Options{Keys: []string{key}, Script: script})

	home, work := t.TempDir(), t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	config := `model = "gpt-5.5"
model_provider = "router"

[model_providers.router]
name = "Router"
base_url = "` + url + `/v1"
env_key = "TANGLE_API_KEY"
wire_api = "responses"
`
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, work, []string{
		"PATH=" + pkg.PATH(), "HOME=" + home, "CODEX_HOME=" + codexHome, "TANGLE_API_KEY=" + key,
	}, pkg.Bin("codex"), "exec", "--json", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox", "Write the proof file, then say something.")

	var texts []string
	var usage map[string]any
	for _, l := range jsonLines(out) {
		switch l["type"] {
		case "item.completed":
			if it, _ := l["item"].(map[string]any); it["type"] == "agent_message" {
				texts = append(texts, it["text"].(string))
			}
		case "turn.completed":
			usage, _ = l["usage"].(map[string]any)
		}
	}
	if !strings.Contains(strings.Join(texts, "\n"), want) {
		t.Errorf("codex agent messages = %q, want one with %q\n%s", texts, want, out)
	}
	checkProof(t, work, "proof.txt", proof)
	reqs := srv.Requests()
	checkKeyed(t, reqs, key, routerstub.AuthBearer, routerstub.FamilyResponses, 2)

	// Codex reports the usage the stub measured, summed over the turn.
	var in, outTokens float64
	for _, r := range reqs {
		in += float64(r.Usage.InputTokens)
		outTokens += float64(r.Usage.OutputTokens)
	}
	if usage["input_tokens"] != in || usage["output_tokens"] != outTokens {
		t.Errorf("codex turn usage = %v, want input %v output %v as the stub measured", usage, in, outTokens)
	}
}

// TestLive_Pi runs the real Pi CLI against the stub over Chat Completions:
// a bash tool call, then the scripted text.
func TestLive_Pi(t *testing.T) {
	env := testbed.Require(t)
	pkg := npmtest.Install(t, env, piSpec)
	key := "sk-router-" + randomHex(t, 24)
	want := "pi reached the stub " + randomHex(t, 6)
	proof := "proof-" + randomHex(t, 4)
	script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
		routerstub.ToolCall("bash", `{"command":"echo `+proof+` > proof.txt"}`),
	).AfterTool(routerstub.Deltas(want, 7))
	srv, url := liveStub(t, routerstub.Options{Keys: []string{key}, Script: script})

	home, work := t.TempDir(), t.TempDir()
	agentDir := filepath.Join(home, ".pi", "agent")
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		t.Fatal(err)
	}
	models := `{"providers": {"router": {"baseUrl": "` + url + `/v1", "api": "openai-completions",
  "apiKey": "$TANGLE_API_KEY", "models": [{"id": "router-chat", "contextWindow": 128000, "maxTokens": 4096,
  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}}`
	if err := os.WriteFile(filepath.Join(agentDir, "models.json"), []byte(models), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, work, []string{
		"PATH=" + pkg.PATH(), "HOME=" + home, "PI_CODING_AGENT_DIR=" + agentDir, "TANGLE_API_KEY=" + key,
		"PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0",
	}, pkg.Bin("pi"), "--mode", "json", "--provider", "router", "--model", "router-chat",
		"Write the proof file, then say something.")

	var final string
	for _, l := range jsonLines(out) {
		if l["type"] != "message_end" {
			continue
		}
		msg, _ := l["message"].(map[string]any)
		if msg["role"] != "assistant" {
			continue
		}
		parts, _ := msg["content"].([]any)
		for _, p := range parts {
			if pm, _ := p.(map[string]any); pm["type"] == "text" {
				final += pm["text"].(string)
			}
		}
	}
	if !strings.Contains(final, want) {
		t.Errorf("pi assistant text = %q, want %q\n%s", final, want, out)
	}
	checkProof(t, work, "proof.txt", proof)
	checkKeyed(t, srv.Requests(), key, routerstub.AuthBearer, routerstub.FamilyChat, 2)
}
