package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// TestLocalRouter starts the local model endpoint as `up --router local`
// does (this test binary re-executed as boxctl), checks that it answers
// with its key only, keeps the key off its command line, and stops it.
func TestLocalRouter(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "routers", "run-test.log")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, key, err := localrouter.StartStub(t.Context(), localrouter.StubOptions{Exe: exe, Host: "127.0.0.1", KeyEnv: routerKeyEnv,
		Reply: localReply, Until: time.Now().Add(time.Minute), Log: logPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	if !r.Running() || !strings.HasPrefix(r.URL, "http://127.0.0.1:") {
		t.Fatalf("local router = %+v, want it running on loopback", r)
	}
	for _, tt := range []struct {
		key  string
		want int
	}{{key, 200}, {"wrong", 401}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, r.URL+"/v1/messages",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Api-Key", tt.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("request with key %q: status %d, want %d", tt.key, resp.StatusCode, tt.want)
		}
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(r.PID) + "/cmdline")
	if err != nil || strings.Contains(string(cmdline), key) || !strings.Contains(string(cmdline), "router-stub") {
		t.Errorf("command line %q (%v): want router-stub without the key", cmdline, err)
	}
	if fi, err := os.Stat(logPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("router log mode = %v, %v; want 0600", fi.Mode(), err)
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "the local router to end", func() bool { return !r.Running() })
	if b, _ := os.ReadFile(logPath); strings.Contains(string(b), key) {
		t.Errorf("the router's log holds its key")
	}
	// A stopped router, or a pid another process has now, is left alone.
	r.Start = "1"
	if err := r.Stop(); err != nil {
		t.Errorf("stop of a gone router = %v", err)
	}
}
