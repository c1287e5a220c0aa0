package boxproc_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/boxproc"
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
