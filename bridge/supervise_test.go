package bridge

import (
	"context"
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

	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// childPIDs returns the children of process pid, from every thread's list.
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil && alive(n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// servingChild waits for the one serving child of the supervisor pid
// other than not, under a deadline.
func servingChild(t *testing.T, pid, not int) int {
	t.Helper()
	var kids []int
	polltest.UntilNil(t, 20*time.Second, fmt.Sprintf("the one serving child of supervisor %d other than %d", pid, not), func() error {
		if kids = slices.DeleteFunc(childPIDs(t, pid), func(k int) bool { return k == not }); len(kids) != 1 {
			return fmt.Errorf("serving children %v", kids)
		}
		return nil
	})
	return kids[0]
}

// TestSupervisedCrashRecovery kills the serving child of box-bridge
// -supervise with SIGKILL mid-run: the supervisor starts it again on the
// same port, data directory and secrets, the run reads
// error/bridge_restarted, a reader resumes from its cursor with no gap
// and no duplicate, and the child never held a secret in its environment
// or its arguments.
func TestSupervisedCrashRecovery(t *testing.T) {
	const routerKey = "rk-supervised-test-key"
	p := &bridgeProc{boxbridgetest.Start(t, boxbridgetest.Options{Args: []string{"-supervise"}, Bearer: procBearer,
		Env: append(os.Environ(), "BRIDGE_LOG_LEVEL=debug", "CLAUDE_BIN="+bridgetest.FakeClaude(t),
			"TANGLE_API_KEY="+routerKey, "TANGLE_ROUTER_URL=http://127.0.0.1:9")})}
	ctx := context.Background()
	first := servingChild(t, p.PID(), 0)
	for _, f := range []string{"environ", "cmdline"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", first, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), procBearer) || strings.Contains(string(b), routerKey) {
			t.Errorf("the serving child's %s holds a secret: %q", f, b)
		}
	}

	body := `{"model":"claude-code/sonnet","stream":true,"run_id":"sup-run","messages":[{"role":"user","content":"slow:400:20"}]}`
	resp := p.req(t, ctx, "POST", "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	before, _ := readFrames(t, resp.Body, 5)
	if len(before) != 5 {
		t.Fatalf("frames before the crash = %q", before)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cursor, _, _ := strings.Cut(before[len(before)-1], "|")

	// The resume goes to the same address: it waits in the listener's
	// backlog while the supervisor starts the next child.
	eresp := p.req(t, ctx, "GET", "/v1/runs/sup-run/events", "", "Last-Event-ID", cursor)
	if eresp.StatusCode != 200 {
		b, _ := io.ReadAll(eresp.Body)
		t.Fatalf("resume from %s = %d %s", cursor, eresp.StatusCode, b)
	}
	after, done := readFrames(t, eresp.Body, 10000)
	eresp.Body.Close()
	if !done || len(after) == 0 || !strings.Contains(after[len(after)-1], wire.TypeBridgeRestarted) {
		t.Fatalf("resume after the restart = %q (done %v), want the stored frames and a bridge_restarted error", after, done)
	}
	all := append(before, after...)
	for i, f := range all {
		if id, _, _ := strings.Cut(f, "|"); id != strconv.Itoa(i+1) {
			t.Fatalf("frame %d has id %s, want %d: ids must run without a gap or a repeat: %q", i, id, i+1, all)
		}
	}
	second := servingChild(t, p.PID(), first)
	if second == first || !alive(p.PID()) {
		t.Errorf("serving child %d after the kill of %d (supervisor alive %v), want a new one", second, first, alive(p.PID()))
	}
	// The restarted child holds the bearer (it answered the resume) and the
	// router key: a new turn runs.
	r := p.req(t, ctx, "POST", "/v1/chat/completions", strings.NewReplacer("sup-run", "sup-run-2", "slow:400:20", "hello").Replace(body))
	frames, done := readFrames(t, r.Body, 10000)
	r.Body.Close()
	if !done || len(frames) == 0 || strings.Contains(frames[len(frames)-1], `"error"`) {
		t.Errorf("a turn after the restart = %q (done %v), want a complete turn", frames, done)
	}
	if !strings.Contains(p.Logs(), "serving bridge ended; restarting") {
		t.Errorf("the supervisor logged no restart:\n%s", p.Logs())
	}
}

// TestSupervisedCrashLoop runs a supervised bridge that cannot start: after
// its crashes the supervisor stops restarting it and answers /health and
// every route with the crash loop's reason.
func TestSupervisedCrashLoop(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &bridgeProc{&boxbridgetest.Proc{}}
	ln := freeAddr(t)
	cmd := exec.Command(boxbridgetest.Build(t), "-supervise")
	cmd.Env = []string{"BRIDGE_HOST=127.0.0.1", "BRIDGE_PORT=" + ln, "BRIDGE_BEARER=" + procBearer,
		"BRIDGE_DATA_DIR=" + filepath.Join(notDir, "data"), "CLAUDE_BIN=/bin/true"}
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	p.URL, p.Bearer = "http://127.0.0.1:"+ln, procBearer
	var h wire.Health
	var status int
	polltest.UntilNil(t, 30*time.Second, "GET /health to report "+wire.HealthCrashLoop, func() error {
		resp, err := http.Get(p.URL + "/health")
		if err != nil {
			return err
		}
		status = resp.StatusCode
		_ = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if h.Status != wire.HealthCrashLoop {
			return fmt.Errorf("GET /health = %d %+v", status, h)
		}
		return nil
	})
	if status != http.StatusServiceUnavailable || h.Status != wire.HealthCrashLoop || len(h.Backends) != 1 ||
		h.Backends[0].Name != "claude-code" || h.Backends[0].State != wire.BackendError ||
		!strings.Contains(h.Backends[0].Detail, "crashed 5 times") || !strings.Contains(h.Backends[0].Detail, "exit status 1") {
		t.Fatalf("GET /health = %d %+v, want 503 %s naming the crashes and the last exit", status, h, wire.HealthCrashLoop)
	}
	resp := p.req(t, context.Background(), "GET", "/v1/runs/x", "")
	var e wire.ErrorResponse
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Type != wire.TypeBridgeCrashLoop {
		t.Errorf("GET /v1/runs/x = %d %+v, want 503 %s", resp.StatusCode, e, wire.TypeBridgeCrashLoop)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Errorf("the supervisor in a crash loop exited 0, want the crash loop's status")
	}
	if !strings.Contains(logs.String(), "bridge crash loop") {
		t.Errorf("the supervisor's log names no crash loop:\n%s", logs.String())
	}
}

// freeAddr returns a free loopback port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
