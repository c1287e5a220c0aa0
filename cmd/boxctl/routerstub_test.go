package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
)

// lockedBuffer is a bytes.Buffer safe to write from the command's goroutine
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startRouterStub runs `boxctl args...` until the test ends and returns its
// stdout once it printed the listening address, its stderr, and a stop
// function returning the command's error.
func startRouterStub(t *testing.T, args ...string) (out string, errOut *lockedBuffer, stop func() error) {
	t.Helper()
	var stdout lockedBuffer
	errOut = &lockedBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	cmd := newRootCmd(newApp(&stdout, errOut))
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("router-stub still running 10s after cancel")
			return nil
		}
	}
	polltest.UntilNil(t, 10*time.Second, "router-stub to print its address", func() error {
		if strings.HasSuffix(stdout.String(), "\n") {
			return nil
		}
		select {
		case err := <-done:
			t.Fatalf("router-stub exited early: %v\nstderr: %s", err, errOut)
		default:
		}
		return fmt.Errorf("stderr: %s", errOut)
	})
	return stdout.String(), errOut, stop
}

func TestRouterStub_Serves(t *testing.T) {
	const key = "sk-cmd-test-key-123"
	out, errOut, stop := startRouterStub(t, "router-stub", "--key", key, "--reply", "scripted words",
		"--served-model", "served-x", "--log-level", "debug", "-o", "json")
	var listening struct{ Addr, URL string }
	if err := json.Unmarshal([]byte(out), &listening); err != nil || !strings.HasPrefix(listening.URL, "http://127.0.0.1:") {
		t.Fatalf("stdout %q (%v), want JSON with a loopback url", out, err)
	}
	for _, tt := range []struct {
		auth       string
		wantStatus int
	}{
		{"Bearer " + key, 200},
		{"Bearer wrong", 401},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, listening.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"asked","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", tt.auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantStatus {
			t.Errorf("status = %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
		}
		if tt.wantStatus == 200 && (!strings.Contains(string(body), "scripted words") || !strings.Contains(string(body), `"model":"served-x"`)) {
			t.Errorf("body = %s, want the reply and the served model", body)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("router-stub returned %v after cancel, want nil", err)
	}
	logs := errOut.String()
	if !strings.Contains(logs, "model request") || !strings.Contains(logs, "/v1/chat/completions") {
		t.Errorf("debug log lacks the requests:\n%s", logs)
	}
	if strings.Contains(logs, key) {
		t.Errorf("log contains the key:\n%s", logs)
	}
}

func TestRouterStub_KeyFromEnv(t *testing.T) {
	t.Setenv(routerKeyEnv, "sk-env-key")
	out, _, stop := startRouterStub(t, "router-stub")
	url := strings.TrimSpace(out)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/messages",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Api-Key", "sk-env-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status = %d, want 200", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func TestRouterStub_Usage(t *testing.T) {
	t.Setenv(routerKeyEnv, "")
	tests := []struct {
		name string
		args []string
	}{
		{"no key", []string{"router-stub"}},
		{"key and no-auth", []string{"router-stub", "--key", "k", "--no-auth"}},
		{"bad addr", []string{"router-stub", "--key", "k", "--addr", "nope"}},
		{"args", []string{"router-stub", "--key", "k", "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(t, tt.args...)
			if got := exitCode(err); got != 2 {
				t.Errorf("exit code = %d (err %v), want 2", got, err)
			}
		})
	}
}
