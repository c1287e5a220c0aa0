package boxproc_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// localRunner is a boxproc.Runner on this machine: each command a process
// in a session of its own, which a cancelled context kills whole, as a
// vendor's Runner kills the command's session in the box. It notes every
// argument vector it ran and how many commands are running.
type localRunner struct {
	mu      sync.Mutex
	argv    [][]string
	running int
}

func (r *localRunner) Run(ctx context.Context, c boxproc.Command) (int, error) {
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	r.mu.Lock()
	r.argv = append(r.argv, c.Argv)
	r.running++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
	}()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stop()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return 0, context.Cause(ctx)
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	}
	return 0, err
}

func (r *localRunner) ran(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.argv, func(a []string) bool {
		return slices.ContainsFunc(a, func(arg string) bool { return strings.Contains(arg, s) })
	})
}

func (r *localRunner) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running == 0
}

func newBox(t *testing.T) (*boxproc.Box, *localRunner) {
	r := &localRunner{}
	return &boxproc.Box{Vendor: "local", Runner: r, ProcDir: filepath.Join(t.TempDir(), "proc")}, r
}

func TestBox_Spawn(t *testing.T) {
	b, r := newBox(t)
	secret := "local-secret-" + strconv.Itoa(os.Getpid())
	work := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	p, err := b.Spawn(ctx, boxproc.SpawnSpec{Name: "p1", Dir: work, Env: map[string]string{"SECRET": secret},
		Command: []string{"sh", "-c", `echo "started $(pwd) ${#SECRET}"; echo err-line >&2; trap 'echo terminated; exit 143' TERM; while :; do sleep 0.1; done`}})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the process outlives the context it was spawned with
	killAtEnd(t, p)
	if p.ID() != "p1" || p.PID() <= 0 {
		t.Errorf("process %q pid %d, want p1 and a pid", p.ID(), p.PID())
	}
	if r.ran(secret) {
		t.Error("the secret is in a command line")
	}
	// The pid is known from the fork on; the command's own environment is
	// there once it has exec'd.
	polltest.Until(t, 20*time.Second, "the process's environment to hold SECRET", func() bool {
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/environ")
		return err == nil && slices.Contains(strings.Split(string(environ), "\x00"), "SECRET="+secret)
	})
	if _, err := b.Spawn(t.Context(), boxproc.SpawnSpec{Name: "p1", Command: []string{"true"}}); err == nil {
		t.Error("Spawn with a name in use succeeded")
	}

	octx, ocancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer ocancel()
	stdout, stderr, err := p.Output(octx)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	defer stderr.Close()
	errC := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stderr)
		errC <- string(b)
	}()
	want := "started " + work + " " + strconv.Itoa(len(secret)) + "\n"
	line := make([]byte, len(want))
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != want {
		t.Fatalf("stdout = %q, %v; want %q", line, err, want)
	}
	again, err := b.Process(t.Context(), "p1")
	if err != nil || again.PID() != p.PID() {
		t.Fatalf("Process(p1) = %v, %v; want pid %d", again, err, p.PID())
	}
	if err := again.Signal(t.Context(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(octx); err != nil || code != 143 {
		t.Errorf("Wait = %d, %v; want 143", code, err)
	}
	if rest, err := io.ReadAll(stdout); string(rest) != "terminated\n" || err != nil {
		t.Errorf("stdout after TERM = %q, %v", rest, err)
	}
	if e := <-errC; e != "err-line\n" {
		t.Errorf("stderr = %q", e)
	}
	if out, errOut, err := again.Logs(t.Context()); err != nil || string(out) != want+"terminated\n" || string(errOut) != "err-line\n" {
		t.Errorf("Logs = %q %q %v", out, errOut, err)
	}
	if code, err := again.Wait(t.Context()); err != nil || code != 143 {
		t.Errorf("Wait through Process(id) = %d, %v; want 143", code, err)
	}
	if err := again.Signal(t.Context(), syscall.SIGTERM); err != nil {
		t.Errorf("Signal after the end = %v, want nil", err)
	}
	polltest.Until(t, 20*time.Second, "every command to end", r.idle)
}

func TestBox_SpawnRefusals(t *testing.T) {
	b, _ := newBox(t)
	for _, tc := range []struct {
		name string
		spec boxproc.SpawnSpec
		want string
	}{
		{"empty command", boxproc.SpawnSpec{}, "empty command"},
		{"bad name", boxproc.SpawnSpec{Name: "a/b", Command: []string{"true"}}, "process name"},
		{"bad environment name", boxproc.SpawnSpec{Command: []string{"true"}, Env: map[string]string{"A-B": "x"}}, "environment variable name"},
		{"missing directory", boxproc.SpawnSpec{Command: []string{"true"}, Dir: "/no/such/dir"}, "no directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Spawn(t.Context(), tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Spawn(%+v) = %v, want an error with %q", tc.spec, err, tc.want)
			}
		})
	}
	for _, id := range []string{"no-such-process", "../x"} {
		if _, err := b.Process(t.Context(), id); err == nil {
			t.Errorf("Process(%q) succeeded", id)
		}
	}
}

func TestProcess_Wait(t *testing.T) {
	b, r := newBox(t)
	for _, tc := range []struct {
		cmd  []string
		want int
	}{
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -KILL $$"}, 137},
		{[]string{"/no/such/command"}, 127},
	} {
		p, err := b.Spawn(t.Context(), boxproc.SpawnSpec{Command: tc.cmd})
		if err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(t.Context()); err != nil || code != tc.want {
			t.Errorf("Wait(%v) = %d, %v; want %d", tc.cmd, code, err, tc.want)
		}
	}
	p, err := b.Spawn(t.Context(), boxproc.SpawnSpec{Command: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	killAtEnd(t, p)
	ctx, cancel := context.WithCancelCause(t.Context())
	errC := make(chan error, 1)
	go func() {
		_, err := p.Wait(ctx)
		errC <- err
	}()
	polltest.Until(t, 20*time.Second, "wait to run", func() bool { return !r.idle() })
	stop := errors.New("stop waiting")
	cancel(stop)
	if err := <-errC; !errors.Is(err, stop) {
		t.Errorf("Wait after cancel = %v, want the cause", err)
	}
	polltest.Until(t, 20*time.Second, "the wait command to end", r.idle)
}

func TestProcess_OutputClosed(t *testing.T) {
	b, r := newBox(t)
	p, err := b.Spawn(t.Context(), boxproc.SpawnSpec{Command: []string{"sh", "-c", "while :; do echo tick; sleep 0.1; done"}})
	if err != nil {
		t.Fatal(err)
	}
	killAtEnd(t, p)

	stdout, stderr, err := p.Output(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 5)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "tick\n" {
		t.Fatalf("stdout = %q, %v", line, err)
	}
	stdout.Close()
	stderr.Close()
	polltest.Until(t, 20*time.Second, "the follower to end after its readers closed", r.idle)

	ctx, cancel := context.WithCancelCause(t.Context())
	stdout, stderr, err = p.Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	defer stderr.Close()
	if _, err := io.ReadFull(stdout, line); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop following")
	cancel(stop)
	if _, err := io.ReadAll(stdout); !errors.Is(err, stop) {
		t.Errorf("stdout after cancel = %v, want the cause", err)
	}
	polltest.Until(t, 20*time.Second, "the follower to end after its context", r.idle)
}

func TestBox_Files(t *testing.T) {
	b, _ := newBox(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "nested", "dir", "file.txt")
	data := []byte("line one\nline two\x00binary\n")
	if err := b.Write(t.Context(), p, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("written file: %v, %v; want mode 640", fi, err)
	}
	if err := b.Write(t.Context(), p, []byte("replaced"), 0); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("replaced file: %v, %v; want mode 644", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "nested", "dir", ".boxctl-write.*")); len(left) > 0 {
		t.Errorf("Write left %v behind", left)
	}
	for _, tc := range []struct {
		path    string
		want    string
		wantErr func(error) bool
	}{
		{p, "replaced", nil},
		{filepath.Join(dir, "missing"), "", func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{dir, "", func(err error) bool { return err != nil && strings.Contains(err.Error(), "not a regular file") }},
		{"relative", "", func(err error) bool { return err != nil }},
	} {
		got, err := b.Read(t.Context(), tc.path)
		if tc.wantErr == nil && (err != nil || string(got) != tc.want) || tc.wantErr != nil && !tc.wantErr(err) {
			t.Errorf("Read(%s) = %q, %v", tc.path, got, err)
		}
	}
	for _, bad := range []string{"relative/path", "/", dir + "/../x"} {
		if err := b.Write(t.Context(), bad, nil, 0o644); err == nil {
			t.Errorf("Write(%q) succeeded", bad)
		}
	}
}

// TestBox_ReadGrowing reads a file a process is writing all the while, as
// Logs does.
func TestBox_ReadGrowing(t *testing.T) {
	b, _ := newBox(t)
	p, err := b.Spawn(t.Context(), boxproc.SpawnSpec{Command: []string{"sh", "-c", "while :; do echo 0123456789; done"}})
	if err != nil {
		t.Fatal(err)
	}
	// The process ends, and its supervisor has written its exit, before
	// the box's directory is removed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.Signal(ctx, syscall.SIGKILL)
		if _, err := p.Wait(ctx); err != nil {
			t.Errorf("Wait after SIGKILL: %v", err)
		}
	})
	const line = "0123456789\n"
	for range 3 {
		out, _, err := p.Logs(t.Context())
		if err != nil {
			t.Fatalf("Logs of a growing file = %v", err)
		}
		for i, c := range out {
			if c != line[i%len(line)] {
				t.Fatalf("Logs = %d bytes, byte %d is %q: not what was written", len(out), i, c)
			}
		}
	}
}

// killAtEnd kills p at the end of t and waits until it ended (its exit
// record written), so that nothing writes in t's directories while they
// are removed.
func killAtEnd(t *testing.T, p *boxproc.Process) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 30*time.Second)
		defer cancel()
		_ = p.Signal(ctx, syscall.SIGKILL)
		_, _ = p.Wait(ctx)
	})
}
