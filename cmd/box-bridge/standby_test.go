package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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
	bin := boxbridgetest.Build(t)
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
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	const token = "pool-token-from-stdin-0123"
	deadlineFile := filepath.Join(dir, "deadline")
	cmd := exec.Command(bin, "--standby")
	cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "BRIDGE_HOST=127.0.0.1", "BRIDGE_PORT=" + port, "BRIDGE_BACKENDS=claude",
		"CLAUDE_BIN=" + claude, "BRIDGE_DATA_DIR=" + filepath.Join(dir, "data"), wire.EnvDeadlineFile + "=" + deadlineFile}
	cmd.Stdin = strings.NewReader(token + "\n")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
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
