package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// TestStandby_Process runs box-bridge --standby as a process: the pool
// token arrives on stdin and is in no environment or command line; the
// bridge refuses every route until the claim, which starts it as a
// normally started bridge with the claim's bearer, and refuses a second.
func TestStandby_Process(t *testing.T) {
	dir := t.TempDir()
	claude := filepath.Join(dir, "claude")
	if err := os.WriteFile(claude, []byte("#!/bin/sh\necho '9.9.9 (stub)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A bwrap that only counts its runs: the jail's probe is the one run
	// before the claim, in standby; the claim makes no namespaces.
	bwrapRuns := filepath.Join(dir, "bwrap-runs")
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte("#!/bin/sh\necho run >> "+bwrapRuns+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const token = "pool-token-from-stdin-0123"
	deadlineFile := filepath.Join(dir, "deadline")
	sp := startStandby(t, token, "PATH="+dir+":"+os.Getenv("PATH"), "BRIDGE_BACKENDS=claude",
		"CLAUDE_BIN="+claude, "BRIDGE_DATA_DIR="+filepath.Join(dir, "data"), wire.EnvDeadlineFile+"="+deadlineFile)
	cmd, logs, do := sp.cmd, sp.logs, sp.do
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
	if bytes.Contains(env, []byte(token)) || bytes.Contains(args, []byte(token)) {
		t.Error("the pool token is in the process's environment or command line")
	}
	if status, body := do("GET", "/v1/models", "", ""); status != 503 || !bytes.Contains(body, []byte(wire.TypeStandby)) {
		t.Errorf("GET /v1/models in standby = %d %s", status, body)
	}
	bearer := strings.Repeat("ab", 32)
	end := time.Now().Add(time.Hour).Unix()
	claim, _ := json.Marshal(wire.Claim{Bearer: bearer, RouterURL: "http://127.0.0.1:9", RouterKey: "router-key-secret",
		Env: map[string]string{"USER_SECRET": "user-secret-value"}, Labels: map[string]string{"team": "a"}, Deadline: end})
	if status, body := do("POST", wire.PathClaim, token, string(claim)); status != 200 {
		t.Fatalf("claim = %d %s", status, body)
	}
	if b, err := os.ReadFile(deadlineFile); err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(end, 10) {
		t.Errorf("deadline file = %q, %v; want %d", b, err, end)
	}
	status, body := do("GET", "/", bearer, "")
	var root struct {
		Capabilities struct {
			Execution wire.ExecutionCaps `json:"execution"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(body, &root); status != 200 || err != nil {
		t.Fatalf("GET / after the claim = %d %s", status, body)
	}
	if x := root.Capabilities.Execution.Jail; !slices.Contains(x.Modes, wire.JailWrite) {
		t.Errorf("the claimed bridge's jail = %+v, want the standby's verdict (available)", x)
	}
	if b, _ := os.ReadFile(bwrapRuns); strings.Count(string(b), "run") != 1 {
		t.Errorf("bwrap ran %d times, want once (the standby's probe)", strings.Count(string(b), "run"))
	}
	tests := []struct {
		method, path, bearer string
		status               int
	}{
		{"GET", "/v1/models", bearer, 200},
		{"GET", "/v1/models", "", 401},
		{"GET", "/v1/models", token, 401},
		{"POST", wire.PathClaim, token, 409},
		{"GET", "/health", "", 200},
	}
	for _, tt := range tests {
		body := ""
		if tt.method == "POST" {
			body = string(claim)
		}
		if status, got := do(tt.method, tt.path, tt.bearer, body); status != tt.status {
			t.Errorf("%s %s after the claim = %d %s, want %d", tt.method, tt.path, status, got, tt.status)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	for _, secret := range []string{token, bearer, "router-key-secret", "user-secret-value"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the bridge's log holds a secret")
		}
	}
}

// standby is a box-bridge --standby process of a test.
type standby struct {
	cmd  *exec.Cmd
	logs *bytes.Buffer
	// do sends a request with bearer ("" for none) and returns the
	// status and body (status 0: the request failed).
	do func(method, path, bearer, body string) (int, []byte)
}

// startStandby runs box-bridge --standby on a free loopback port with
// env as its whole environment, token on its stdin, and waits until its
// /health says standby.
func startStandby(t *testing.T, token string, env ...string) *standby {
	t.Helper()
	bin := boxbridgetest.Build(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command(bin, "--standby")
	cmd.Env = append([]string{"BRIDGE_HOST=127.0.0.1", "BRIDGE_PORT=" + port}, env...)
	cmd.Stdin = strings.NewReader(token + "\n")
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait() // a second Wait answers at once
		if t.Failed() {
			t.Logf("box-bridge output:\n%s", logs.String())
		}
	})
	url := "http://127.0.0.1:" + port
	do := func(method, path, bearer, body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	polltest.UntilNil(t, 60*time.Second, "standby /health to answer standby", func() error {
		status, body := do("GET", "/health", "", "")
		var h wire.Health
		if status == 200 && json.Unmarshal(body, &h) == nil && h.Standby && h.Status == wire.HealthStandby {
			return nil
		}
		return fmt.Errorf("%d %s", status, body)
	})
	return &standby{cmd: cmd, logs: logs, do: do}
}

// TestStandby_RelaySpare: with the model relay, a pooled bridge starts its
// harness before any claim, with no key but the relay's placeholder; the
// claim binds it, and the first turn runs in that process and reaches the
// model with the claim's key, which no harness process ever held.
func TestStandby_RelaySpare(t *testing.T) {
	dir := t.TempDir()
	type call struct{ path, auth string }
	calls := make(chan call, 4)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, wire.ReplicaPath) {
			http.NotFound(w, r) // a Router keeps no replica: the bridge stops shipping
			return
		}
		calls <- call{r.URL.Path, r.Header.Get("Authorization")}
		_, _ = io.WriteString(w, "model-answer")
	}))
	t.Cleanup(model.Close)
	workspace := filepath.Join(dir, "workspace")
	if err := os.Mkdir(workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	const routerKey = "router-key-from-the-claim"
	// A variable of this test only, in every harness process it starts.
	tag := "STANDBY_RELAY_TEST=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	sp := startStandby(t, "pool-token-0123456789", "PATH="+os.Getenv("PATH"), "BRIDGE_BACKENDS=claude", tag,
		"CLAUDE_BIN="+boxbridgetest.Binary(t, "bridge/internal/fakeclaude", "claude"), "BRIDGE_DATA_DIR="+filepath.Join(dir, "data"),
		wire.EnvModelRelay+"=1", wire.EnvPrestartCwd+"="+workspace)
	// The harness, started before the claim.
	var spareEnv []string
	polltest.UntilNil(t, 60*time.Second, "a harness started before the claim", func() error {
		envs := processEnvs(tag, sp.cmd.Process.Pid)
		if len(envs) != 1 {
			return fmt.Errorf("%d harness processes", len(envs))
		}
		spareEnv = envs[0]
		return nil
	})
	if v := envValue(spareEnv, "ANTHROPIC_AUTH_TOKEN"); v != "boxctl-relay" {
		t.Errorf("the spare's ANTHROPIC_AUTH_TOKEN = %q, want the relay's placeholder", v)
	}
	if v := envValue(spareEnv, "ANTHROPIC_BASE_URL"); !strings.HasPrefix(v, "http://127.0.0.1:") || v == model.URL {
		t.Errorf("the spare's ANTHROPIC_BASE_URL = %q, want the relay on loopback", v)
	}
	bearer := strings.Repeat("cd", 32)
	claim, _ := json.Marshal(wire.Claim{Bearer: bearer, RouterURL: model.URL, RouterKey: routerKey,
		Deadline: time.Now().Add(time.Hour).Unix()})
	if status, body := sp.do("POST", wire.PathClaim, "pool-token-0123456789", string(claim)); status != 200 {
		t.Fatalf("claim = %d %s", status, body)
	}
	turn := fmt.Sprintf(`{"model":"claude-code","cwd":%q,"messages":[{"role":"user","content":"model"}]}`, workspace)
	status, body := sp.do("POST", "/v1/chat/completions", bearer, turn)
	var c wire.Completion
	if status != 200 || json.Unmarshal(body, &c) != nil || len(c.Choices) != 1 {
		t.Fatalf("turn = %d %s", status, body)
	}
	if got := c.Choices[0].Message.Content; got != "ok 200 model-answer" {
		t.Errorf("the turn's answer = %q, want the model's through the relay", got)
	}
	select {
	case got := <-calls:
		if got.path != "/v1/messages" || got.auth != "Bearer "+routerKey {
			t.Errorf("the model got %s with Authorization %q, want /v1/messages with the claim's key", got.path, got.auth)
		}
	default:
		t.Fatal("the model got no request")
	}
	status, metrics := sp.do("GET", "/metrics", bearer, "")
	if status != 200 || !bytes.Contains(metrics, []byte("bridge_spare_turns_total 1")) {
		t.Errorf("the turn did not run in the harness started before the claim:\n%s", metrics)
	}
	for _, env := range processEnvs(tag, sp.cmd.Process.Pid) {
		if slices.ContainsFunc(env, func(kv string) bool { return strings.Contains(kv, routerKey) }) {
			t.Errorf("a harness process holds the claim's key")
		}
	}
}

// processEnvs returns the environments of the live processes other than
// not that carry kv.
func processEnvs(kv string, not int) [][]string {
	var out [][]string
	names, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range names {
		if p == fmt.Sprintf("/proc/%d/environ", not) {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		env := strings.Split(string(b), "\x00")
		if slices.Contains(env, kv) {
			if st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				out = append(out, env)
			}
		}
	}
	return out
}

// envValue is the value of name in env.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}
