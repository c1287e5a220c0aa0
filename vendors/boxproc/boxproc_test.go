package boxproc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

func TestCapped(t *testing.T) {
	c := &boxproc.Capped{Max: 4}
	for _, p := range []string{"ab", "cdef", "gh"} {
		if n, err := c.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want all written", p, n, err)
		}
	}
	if c.String() != "abcd" {
		t.Errorf("Capped holds %q, want abcd", c.String())
	}
	c = &boxproc.Capped{Max: 4}
	if n, err := io.Copy(c, strings.NewReader("0123456789")); n != 10 || err != nil || c.String() != "0123" {
		t.Errorf("io.Copy into Capped = %d, %v, holds %q; want all read, 0123 kept", n, err, c.String())
	}
}

func TestPipes(t *testing.T) {
	closed := 0
	out, errR, outW, errW := boxproc.Pipes(func() { closed++ })
	go func() {
		_, _ = outW.Write([]byte("o"))
		outW.Close()
		errW.CloseWithError(errors.New("cut"))
	}()
	if b, err := io.ReadAll(out); string(b) != "o" || err != nil {
		t.Errorf("stdout = %q, %v", b, err)
	}
	if _, err := io.ReadAll(errR); err == nil || err.Error() != "cut" {
		t.Errorf("stderr error = %v, want the writer's", err)
	}
	out.Close()
	errR.Close()
	if closed != 2 {
		t.Errorf("onClose ran %d times, want once per reader", closed)
	}
}

func TestLogs(t *testing.T) {
	files := map[string]string{"/p/stdout": "out", "/p/stderr": "err"}
	read := func(_ context.Context, p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	if o, e, err := boxproc.Logs(t.Context(), "v", read, "/p"); string(o) != "out" || string(e) != "err" || err != nil {
		t.Errorf("Logs = %q %q %v", o, e, err)
	}
	if _, _, err := boxproc.Logs(t.Context(), "v", read, "/q"); !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "v: logs of q:") {
		t.Errorf("Logs(missing) = %v, want fs.ErrNotExist naming vendor and process", err)
	}
}

// TestScripts runs the exec wrapper, the session kill and the signal
// command with this machine's shell.
func TestScripts(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "exec", "x")
	cmd := exec.Command("/bin/sh", append([]string{"-c", boxproc.ExecWrapper, pidFile}, "sh", "-c", "sleep 60 & wait")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := boxproc.KillSession(pidFile)
	if out, err := exec.Command(kill[0], kill[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("KillSession: %v %s", err, out)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the wrapped command survived KillSession")
	}
	sig := boxproc.Signal(15, 999999, t.TempDir())
	if out, err := exec.Command(sig[0], sig[1:]...).CombinedOutput(); err != nil {
		t.Errorf("Signal(an ended process) = %v %s, want success", err, out)
	}
	if err := boxproc.CheckEnv(map[string]string{"GOOD_1": "x", "bad-name": "y"}); err == nil {
		t.Error("CheckEnv accepted bad-name")
	}
}

// TestEnvScripts runs the scripts that take their environment on stdin
// with this machine's shell: the values reach the command, not its
// command line, and the rest of stdin stays the command's.
func TestEnvScripts(t *testing.T) {
	env := map[string]string{"SECRET": "s3cr3t value\twith=signs", "OTHER": "line1\nline2\n\n", "d": "not the record", "p": "x", "kv": "y"}
	lines, err := boxproc.EnvLines(env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(lines, "s3cr3t") || !strings.HasSuffix(lines, "\n\n") || !strings.HasPrefix(lines, "OTHER=") {
		t.Errorf("EnvLines = %q, want sorted encoded lines and an empty one", lines)
	}
	for _, name := range []string{"no-dash", "_bxd", "1A"} {
		if _, err := boxproc.EnvLines(map[string]string{name: ""}); err == nil {
			t.Errorf("EnvLines accepted the name %q", name)
		}
	}

	t.Run("exec", func(t *testing.T) {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "exec", "p")
		cmd := exec.Command("/bin/sh", "-c", boxproc.ExecEnvWrapper, pidFile, dir, "sh", "-c", `printf '%s|%s|%s|%s|' "$SECRET" "$OTHER" "$d$p$kv" "$(pwd)"; cat`)
		cmd.Stdin = strings.NewReader(lines + "rest of stdin")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := env["SECRET"] + "|" + env["OTHER"] + "|" + env["d"] + env["p"] + env["kv"] + "|" + dir + "|rest of stdin"; string(out) != want {
			t.Errorf("output = %q, want %q", out, want)
		}
	})

	t.Run("detached supervisor", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "proc", "p1")
		// The process reports whether its supervisor's own (initial)
		// environment holds the secret.
		cmd := exec.Command("/bin/sh", "-c", boxproc.DetachedSupervisor, "spawn", rec, "", "sh", "-c",
			`echo "$SECRET"; tr '\0' '\n' </proc/$PPID/environ | grep -c '^SECRET=' >&2; exit 7`)
		cmd.Stdin = strings.NewReader(lines)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		pid := strings.TrimSpace(string(out))
		if pid == "" || strings.ContainsAny(pid, " \n") {
			t.Fatalf("supervisor printed %q, want the pid", out)
		}
		var exit []byte
		polltest.UntilNil(t, 10*time.Second, "the exit record", func() (err error) {
			exit, err = os.ReadFile(filepath.Join(rec, "exit"))
			return err
		})
		if string(exit) != "7\n" {
			t.Fatalf("exit record = %q, %v; want 7", exit, err)
		}
		if b, _ := os.ReadFile(filepath.Join(rec, "stdout")); string(b) != env["SECRET"]+"\n" {
			t.Errorf("stdout = %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(rec, "stderr")); string(b) != "0\n" {
			t.Errorf("the supervisor's environment holds the secret (%q matches)", b)
		}
		if b, _ := os.ReadFile(filepath.Join(rec, "pid")); strings.TrimSpace(string(b)) != pid {
			t.Errorf("pid record = %q, printed %q", b, pid)
		}
		cut := exec.Command("/bin/sh", "-c", boxproc.DetachedSupervisor, "spawn", rec+"-cut", "", "true")
		cut.Stdin = strings.NewReader("A=YQ==\n")
		if out, err := cut.CombinedOutput(); err == nil || !strings.Contains(string(out), "environment cut short") {
			t.Errorf("an environment without its end: %v %q, want the supervisor's refusal", err, out)
		}
		bad := exec.Command("/bin/sh", "-c", boxproc.DetachedSupervisor, "spawn", rec+"-bad", "", "true")
		bad.Stdin = strings.NewReader("X=!!!not base64\n\n")
		if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "bad environment line") {
			t.Errorf("a bad environment line: %v %q, want the supervisor's refusal", err, out)
		}
		again := exec.Command("/bin/sh", "-c", boxproc.DetachedSupervisor, "spawn", rec, "", "true")
		again.Stdin = strings.NewReader("\n")
		if err := again.Run(); err == nil {
			t.Error("a second process with the same record started")
		}
	})
}

func TestTarFile(t *testing.T) {
	data := []byte("content\x00with a NUL")
	archive, err := boxproc.TarFile("data", data, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := boxproc.UntarFile(bytes.NewReader(archive), 1<<20); err != nil || !bytes.Equal(got, data) {
		t.Errorf("UntarFile(TarFile) = %q, %v", got, err)
	}
	if _, err := boxproc.UntarFile(bytes.NewReader(archive), 4); err == nil {
		t.Error("UntarFile took a file over its limit")
	}
	for p, ok := range map[string]bool{"/a/b": true, "a/b": false, "/a/../b": false, "/": false, "/a/": false} {
		if err := boxproc.WritePath(p); (err == nil) != ok {
			t.Errorf("WritePath(%q) = %v, want ok %v", p, err, ok)
		}
	}
}

func TestSpawnName(t *testing.T) {
	if n, err := boxproc.SpawnName([]string{"true"}, ""); err != nil || !boxproc.Name.MatchString(n) {
		t.Errorf("SpawnName(no name) = %q, %v; want a random valid one", n, err)
	}
	if n, err := boxproc.SpawnName([]string{"true"}, "bridge"); err != nil || n != "bridge" {
		t.Errorf("SpawnName(bridge) = %q, %v", n, err)
	}
	for _, tc := range []struct {
		cmd  []string
		name string
	}{{nil, "x"}, {[]string{"true"}, "../x"}, {[]string{"true"}, "-x"}} {
		if _, err := boxproc.SpawnName(tc.cmd, tc.name); err == nil {
			t.Errorf("SpawnName(%q, %q) accepted", tc.cmd, tc.name)
		}
	}
}
