package boxbridgetest_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// stubClaude writes a stand-in for the claude CLI that answers --version,
// which is all /health asks of a backend.
func stubClaude(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho '9.9.9 (stub)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func get(t *testing.T, url, bearer string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// environ reads a process's environment from /proc.
func environ(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func TestBuild(t *testing.T) {
	first := boxbridgetest.Build(t)
	fi, err := os.Stat(first)
	if err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("Build() = %s (%v), want an executable", first, err)
	}
	if again := boxbridgetest.Build(t); again != first {
		t.Errorf("Build() again = %s, want the first build %s", again, first)
	}
}

func TestStart(t *testing.T) {
	t.Setenv("BOXBRIDGETEST_LEAK", "from the test process")
	claude := stubClaude(t)
	p := boxbridgetest.Start(t, boxbridgetest.Options{
		Env: []string{"CLAUDE_BIN=" + claude, "BRIDGE_BEARER=overridden"}})

	if !strings.HasPrefix(p.URL, "http://127.0.0.1:") || len(p.Bearer) < 16 || p.Bearer == "overridden" {
		t.Fatalf("Start() = URL %q, bearer %q, want a loopback URL and a random bearer", p.URL, p.Bearer)
	}
	if got := get(t, p.URL+"/health", ""); got != http.StatusOK {
		t.Errorf("GET /health = %d, want 200", got)
	}
	if got := get(t, p.URL+"/", ""); got != http.StatusUnauthorized {
		t.Errorf("GET / without the bearer = %d, want 401", got)
	}
	if got := get(t, p.URL+"/", p.Bearer); got != http.StatusOK {
		t.Errorf("GET / with Proc.Bearer = %d, want 200", got)
	}
	env := environ(t, p.PID())
	for _, kv := range env {
		if strings.HasPrefix(kv, "BOXBRIDGETEST_LEAK=") {
			t.Errorf("the bridge inherited %s, want only Options.Env and Start's variables", kv)
		}
	}
	if last := env[len(env)-1]; last != "BRIDGE_DATA_DIR="+p.DataDir {
		t.Errorf("last variable = %q, want Start's BRIDGE_DATA_DIR after Options.Env", last)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if pgrp := fields[2]; pgrp != strconv.Itoa(p.PID()) {
		t.Errorf("process group = %s, want the bridge's own (%d)", pgrp, p.PID())
	}
	if !strings.Contains(p.Logs(), "msg=listening addr="+strings.TrimPrefix(p.URL, "http://")) {
		t.Errorf("Logs() = %q, want the bridge's listening line", p.Logs())
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Errorf("Wait() after SIGTERM = %v, want a clean shutdown", err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done() is open after Wait returned")
	}
}

func TestStart_Restart(t *testing.T) {
	claude := stubClaude(t)
	env := []string{"CLAUDE_BIN=" + claude}
	first := boxbridgetest.Start(t, boxbridgetest.Options{Env: env, Bearer: "fixed-bearer"})
	entries, err := os.ReadDir(first.DataDir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("data dir %s holds %v (%v), want the bridge's store", first.DataDir, entries, err)
	}
	first.Kill()
	if err := first.Wait(); err == nil {
		t.Error("Wait() after Kill = nil, want the SIGKILL exit")
	}
	second := boxbridgetest.Start(t, boxbridgetest.Options{Env: env, Bearer: first.Bearer, DataDir: first.DataDir})
	if second.Bearer != "fixed-bearer" || second.DataDir != first.DataDir || second.URL == "" {
		t.Errorf("restart = %+v, want the given bearer and data dir", second)
	}
	if got := get(t, second.URL+"/", "fixed-bearer"); got != http.StatusOK {
		t.Errorf("GET / on the restarted bridge = %d, want 200", got)
	}
}
