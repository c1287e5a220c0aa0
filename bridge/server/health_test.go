package server

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/gemini"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// slowHarness is a harness binary whose `--version` counts its runs, then
// answers only once release is called for it (while its file block is).
type slowHarness struct {
	bin, fifo, runs, block string
}

func newSlowHarness(t *testing.T) *slowHarness {
	t.Helper()
	dir := t.TempDir()
	h := &slowHarness{bin: filepath.Join(dir, "claude"), fifo: filepath.Join(dir, "release"), runs: filepath.Join(dir, "runs"),
		block: filepath.Join(dir, "block")}
	if err := syscall.Mkfifo(h.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho run >> " + h.runs + "\nif [ -e " + h.block + " ]; then read line < " + h.fifo + "; fi\necho '9.9.9 (Claude Code)'\n"
	if err := os.WriteFile(h.bin, []byte(script), 0o755); err != nil || os.WriteFile(h.block, nil, 0o600) != nil {
		t.Fatal(err)
	}
	return h
}

// release lets one waiting `--version` answer (it blocks until one reads).
func (h *slowHarness) release(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(h.fifo, []byte("go\n"), 0); err != nil {
		t.Error(err)
	}
}

func (h *slowHarness) count(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile(h.runs)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Count(string(data), "run\n")
}

// health is GET path with a client that gives up after timeout (none
// when 0); a request that timed out returns a nil health.
func (v *env) health(t *testing.T, path string, timeout time.Duration) (*wire.Health, int) {
	t.Helper()
	ctx := t.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return new(decode[wire.Health](t, resp)), resp.StatusCode
}

// A harness slower to answer `--version` than the health checks' clients
// wait is reported ready all the same: a check that gives up leaves the
// probe running, and the checks after it join that probe instead of
// killing it and starting another.
func TestHealth_probeOutlivesItsRequest(t *testing.T) {
	sh := newSlowHarness(t)
	v := newEnv(t, config{bin: sh.bin})
	for range 2 {
		if h, _ := v.health(t, "/health", 100*time.Millisecond); h != nil {
			t.Fatalf("GET /health = %+v before the probe answered", h)
		}
	}
	sh.release(t)
	h, status := v.health(t, "/health", 0)
	if status != http.StatusOK || h.Backends[0].State != wire.BackendReady || h.Backends[0].Version != "9.9.9 (Claude Code)" {
		t.Fatalf("GET /health = %d %+v, want ready", status, h)
	}
	if n := sh.count(t); n != 1 {
		t.Errorf("--version ran %d times, want once (the checks joined one probe)", n)
	}
}

// A ready verdict past HealthTTL is answered at once while the probe that
// refreshes it runs; force waits for that probe (and starts no other).
func TestHealth_staleReadyWhileRefreshing(t *testing.T) {
	sh := newSlowHarness(t)
	v := newEnv(t, config{bin: sh.bin, server: Options{HealthTTL: time.Nanosecond}})
	go sh.release(t)
	if h, status := v.health(t, "/health", 0); status != http.StatusOK || h.Backends[0].Cached {
		t.Fatalf("first GET /health = %d %+v, want a fresh ready", status, h)
	}
	// The refresh this starts waits for a release that has not come.
	h, status := v.health(t, "/health", 0)
	if status != http.StatusOK || h.Backends[0].State != wire.BackendReady || !h.Backends[0].Cached {
		t.Fatalf("GET /health during a refresh = %d %+v, want the last ready verdict, cached", status, h)
	}
	if h, _ := v.health(t, "/health?force=1", 100*time.Millisecond); h != nil {
		t.Fatalf("GET /health?force=1 = %+v before the refresh answered", h)
	}
	// Nothing answers until the release: the force joined the refresh.
	polltest.Until(t, 30*time.Second, "the refresh to start", func() bool { return sh.count(t) >= 2 })
	if n := sh.count(t); n != 2 {
		t.Errorf("--version ran %d times, want twice (the first probe and one refresh)", n)
	}
	if err := os.Remove(sh.block); err != nil {
		t.Fatal(err)
	}
	sh.release(t)
	if h, status := v.health(t, "/health?force=1", 0); status != http.StatusOK || h.Backends[0].Cached {
		t.Fatalf("GET /health?force=1 = %d %+v, want a fresh ready", status, h)
	}
}

// A probe runs with what its adapter adds to the probe's environment:
// Gemini CLI's keeps it in one process.
func TestHealth_probeEnvOfTheAdapter(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gemini")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"relaunch off: $GEMINI_CLI_NO_RELAUNCH\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newHealthCache(Options{HealthTTL: time.Minute, ProbeTimeout: time.Minute})
	got := h.probe(t.Context(), &engine.Backend{Adapter: gemini.Adapter{}, Bin: bin}, false)
	if got.State != wire.BackendReady || got.Version != "relaunch off: true" {
		t.Errorf("probe = %+v, want version %q", got, "relaunch off: true")
	}
}
