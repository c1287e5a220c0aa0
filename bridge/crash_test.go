package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// bridgeProc is a running box-bridge.
type bridgeProc struct{ *boxbridgetest.Proc }

// procBearer is the bearer token of the box-bridge processes the tests start.
const procBearer = "crash-test-bearer"

// startBridge runs box-bridge on dataDir with fakeclaude as its claude
// backend and env added to the test process's environment.
func startBridge(t testing.TB, dataDir string, env ...string) *bridgeProc {
	t.Helper()
	procEnv := append(os.Environ(), "BRIDGE_LOG_LEVEL=debug", "CLAUDE_BIN="+bridgetest.FakeClaude(t),
		"TANGLE_API_KEY=rk-crash-test-key", "TANGLE_ROUTER_URL=http://127.0.0.1:9")
	return &bridgeProc{boxbridgetest.Start(t, boxbridgetest.Options{
		Env: append(procEnv, env...), Bearer: procBearer, DataDir: dataDir})}
}

func (p *bridgeProc) req(t testing.TB, ctx context.Context, method, path, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, p.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.Bearer)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

// readFrames reads SSE frames until n data frames arrived or the stream
// ended; it returns the frames as "id|data".
func readFrames(t *testing.T, r io.Reader, n int) (frames []string, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	id := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case line == "data: [DONE]":
			return frames, true
		case strings.HasPrefix(line, "data: "):
			frames = append(frames, id+"|"+line[6:])
			if len(frames) == n {
				return frames, false
			}
		}
	}
	return frames, false
}

// TestCrashRecovery kills the bridge with SIGKILL mid-run, restarts it on
// the same data directory, and checks that every committed event replays,
// the run reads error/bridge_restarted, and the orphaned harness (and its
// child) were ended.
func TestCrashRecovery(t *testing.T) {
	data := t.TempDir()
	pidfile := filepath.Join(t.TempDir(), "pids")
	b1 := startBridge(t, data)
	ctx := context.Background()
	body := fmt.Sprintf(`{"model":"claude-code/sonnet","stream":true,"run_id":"crash-run","messages":[{"role":"user","content":"stubborn"}],"env":{"FAKE_PIDFILE":%q}}`, pidfile)
	resp := b1.req(t, ctx, "POST", "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	digest := resp.Header.Get(wire.HeaderRunRequestDigest)
	before, _ := readFrames(t, resp.Body, 1)
	if len(before) != 1 || !strings.Contains(before[0], "working") {
		t.Fatalf("frames before the crash = %q", before)
	}
	var pids []int
	polltest.Until(t, 10*time.Second, "the harness's pids in the pidfile", func() bool {
		if b, err := os.ReadFile(pidfile); err == nil && len(b) > 0 {
			for _, f := range strings.Fields(string(b)) {
				p, _ := strconv.Atoi(f)
				pids = append(pids, p)
			}
		}
		return len(pids) > 0
	})
	if len(pids) != 2 {
		t.Fatalf("harness pids = %v", pids)
	}

	b1.Kill() // SIGKILL: no shutdown code runs
	resp.Body.Close()
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("harness process %d died with the bridge; the test cannot show recovery kills it", p)
		}
	}

	b2 := startBridge(t, data)
	for _, p := range pids {
		polltest.Until(t, 5*time.Second, fmt.Sprintf("orphan harness process %d to end with the restart", p), func() bool { return !alive(p) })
	}
	sresp := b2.req(t, ctx, "GET", "/v1/runs/crash-run", "")
	var snap wire.RunSnapshot
	json.NewDecoder(sresp.Body).Decode(&snap)
	sresp.Body.Close()
	if snap.Status != wire.StatusError || !snap.Terminal || snap.Error == nil || snap.Error.Type != wire.TypeBridgeRestarted ||
		!strings.Contains(snap.Error.Message, "restarted") || snap.RequestDigest != digest {
		t.Errorf("snapshot after restart = %+v", snap)
	}
	eresp := b2.req(t, ctx, "GET", "/v1/runs/crash-run/events", "")
	after, done := readFrames(t, eresp.Body, 100)
	eresp.Body.Close()
	if !done || len(after) != 2 {
		t.Fatalf("replay after restart = %q done %v, want the stored frame and the restart error", after, done)
	}
	if diff := cmp.Diff(before, after[:1]); diff != "" {
		t.Errorf("replayed frames differ (-before +after):\n%s", diff)
	}
	if !strings.Contains(after[1], wire.TypeBridgeRestarted) {
		t.Errorf("last frame = %q, want a bridge_restarted error", after[1])
	}
	// An identical retry attaches to the recovered run, a different one conflicts.
	if r := b2.req(t, ctx, "POST", "/v1/chat/completions", strings.Replace(body, "stubborn", "hello", 1)); r.StatusCode != 409 {
		t.Errorf("different request under the recovered id = %d, want 409", r.StatusCode)
	}
}
