package exact

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

func TestMain(m *testing.M) {
	jail.ServeRelayIfAsked() // the test binary launches the exact processes
	os.Exit(m.Run())
}

func open(t *testing.T, dir string) (*Manager, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(dir, "data"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	j := jail.New(jail.Options{DataDir: filepath.Join(dir, "data")})
	if err := j.Probe(context.Background()); err != nil {
		t.Fatalf("bubblewrap must run here (the test bed installs it): %v", err)
	}
	m, err := New(Options{Store: st, Jailer: j, Dir: filepath.Join(dir, "data", "exact")})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, st
}

func request(key string) wire.ExactEnvironmentRequest {
	return wire.ExactEnvironmentRequest{IdempotencyKey: key, Image: wire.ExactImageBox,
		Egress: wire.ExactEgress{Mode: wire.EgressBlocked}, MaxLifetimeMS: 60_000,
		Resources: wire.ExactResources{CPU: 1, MemoryMB: 256, DiskMB: 64}, Metadata: map[string]json.RawMessage{}}
}

// TestManager_Restart shows what a manager on the same store and
// directory finds after its predecessor died with a process running: the
// environment and its finished process's output are there, the running
// one is recorded ended by SIGKILL and its leftover (a process still
// carrying its marker in its group) is killed.
func TestManager_Restart(t *testing.T) {
	dir := t.TempDir()
	m, st := open(t, dir)
	ctx := context.Background()
	res, err := m.Create(ctx, request("restart"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Environment.ID
	done, err := m.Spawn(ctx, id, wire.ExactLaunch{Executable: "/bin/echo", Args: []string{"kept"}, Cwd: "/tmp", Env: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.Status(ctx, id, done.PID, 10*time.Second); err != nil || s.Running || s.ExitCode != 0 {
		var stderr bytesBuffer
		m.Output(ctx, id, done.PID, "stderr", &stderr, func() {})
		t.Fatalf("echo = %+v, %v, stderr %q; want it ended with 0", s, err, stderr)
	}
	var out bytesBuffer
	if err := m.Output(ctx, id, done.PID, "stdout", &out, func() {}); err != nil || string(out) != "kept\n" {
		t.Fatalf("output before the restart = %q, %v; want kept", out, err)
	}
	// The predecessor's running process: a process group of its own whose
	// leader carries the marker, recorded running.
	leftover := exec.Command("/bin/sleep", "60")
	leftover.Env = []string{marker(id, 2)}
	leftover.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leftover.Process.Kill(); leftover.Wait() })
	running := wire.ExactProcessStatus{Running: true, ExitCode: -1, StartedAt: "2026-01-01T00:00:00Z"}
	if _, err := st.AddExactProcess(ctx, id, 10, func(pid int64) ([]byte, error) {
		running.PID = pid
		return json.Marshal(running)
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.record(ctx, id, leftover.Process.Pid, running); err != nil {
		t.Fatal(err)
	}
	// A directory of an environment the store does not hold is swept.
	stray := filepath.Join(dir, "data", "exact", "xenv_stray")
	if err := os.MkdirAll(stray, 0o700); err != nil {
		t.Fatal(err)
	}

	next, err := New(Options{Store: st, Jailer: m.opts.Jailer, Dir: m.opts.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close(ctx) })
	if err := leftover.Wait(); err == nil || leftover.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the leftover ended with %v, want SIGKILL", err)
	}
	s, err := next.Status(ctx, id, running.PID, 0)
	want := &wire.ExactTermination{Kind: wire.TerminationSignal, Signal: "SIGKILL"}
	if err != nil || s.Running || s.ExitSignal != "SIGKILL" || !cmp.Equal(s.Termination, want) {
		t.Errorf("the running process after the restart = %+v, %v; want ended by SIGKILL", s, err)
	}
	out = out[:0]
	if err := next.Output(ctx, id, done.PID, "stdout", &out, func() {}); err != nil || string(out) != "kept\n" {
		t.Errorf("output after the restart = %q, %v; want kept", out, err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stray directory: %v, want it removed", err)
	}
	again, err := next.Create(ctx, request("restart"))
	if err != nil || again.Status != wire.ExactReplayed || again.Environment.ID != id {
		t.Errorf("create after the restart = %+v, %v; want the environment replayed", again, err)
	}
}

// TestManager_Lifetime shows an environment destroyed when its lifetime
// ends, with the process running in it.
func TestManager_Lifetime(t *testing.T) {
	m, _ := open(t, t.TempDir())
	ctx := context.Background()
	req := request("short")
	req.MaxLifetimeMS = 500
	res, err := m.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Environment.ID
	p, err := m.Spawn(ctx, id, wire.ExactLaunch{Executable: "/bin/sleep", Args: []string{"60"}, Cwd: "/tmp", Env: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	live := m.procs[procKey{id, p.PID}]
	m.mu.Unlock()
	select {
	case <-live.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the process outlived its environment's lifetime by 30s")
	}
	// The process ends first; the environment's record goes right after.
	polltest.Until(t, 30*time.Second, "Get after the lifetime to answer ErrNotFound", func() bool {
		_, err := m.Get(ctx, id)
		return errors.Is(err, ErrNotFound)
	})
	polltest.Until(t, 30*time.Second, "the expired environment's directory to go", func() bool {
		_, err := os.Stat(m.envDir(id))
		return errors.Is(err, os.ErrNotExist)
	})
}

type bytesBuffer []byte

func (b *bytesBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }
