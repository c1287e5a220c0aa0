package boximage_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/boximage"
)

// TestInitScript runs the rendered box-init with the system's sh and
// timeout(1), as the image does, and checks that the box ends at its deadline.
func TestInitScript(t *testing.T) {
	r := render(t, loadPins(t), boximage.RenderOptions{Harnesses: []string{"pi"}})
	script := filepath.Join(t.TempDir(), boximage.InitFile)
	if err := os.WriteFile(script, r.Files[boximage.InitFile], 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		min, max time.Duration
	}{
		{"lifetime ends a long command", []string{"BOX_LIFETIME=1"}, []string{"sleep", "30"}, 124, time.Second, 5 * time.Second},
		{"deadline ends the default command", []string{"BOX_DEADLINE=+2", "BOX_LIFETIME=600"}, nil, 124, time.Second, 6 * time.Second},
		{"a command ignoring SIGTERM is killed after the grace", []string{"BOX_LIFETIME=1", "BOX_KILL_GRACE=1"},
			[]string{"sh", "-c", `trap "" TERM; sleep 30 & wait; sleep 30`}, 137, 2 * time.Second, 7 * time.Second},
		{"a command that finishes ends the box with its status", []string{"BOX_LIFETIME=60"}, []string{"sh", "-c", "exit 3"}, 3, 0, 3 * time.Second},
		{"deadline already passed", []string{"BOX_DEADLINE=+-5"}, []string{"sleep", "30"}, 124, 0, 2 * time.Second},
		{"no deadline at all", nil, []string{"sleep", "30"}, 2, 0, 2 * time.Second},
		{"malformed deadline", []string{"BOX_DEADLINE=tomorrow"}, []string{"sleep", "30"}, 2, 0, 2 * time.Second},
		{"a deadline moved earlier ends the box", []string{"BOX_LIFETIME=600", "moved=+1"},
			[]string{"sleep", "30"}, 124, time.Second, 5 * time.Second},
		{"a moved deadline not yet due leaves it", []string{"BOX_LIFETIME=2", "moved=+600"},
			[]string{"sleep", "30"}, 124, time.Second, 5 * time.Second},
		{"a malformed moved deadline is ignored", []string{"BOX_LIFETIME=2", "moved=soon"},
			[]string{"sleep", "30"}, 124, time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), "sh", append([]string{script}, tt.args...)...)
			// Each case has a deadline file of its own: "moved=" in env
			// is its content, none without. A value "+N" is N seconds
			// from the start of the case (parallel cases wait their turn).
			file := filepath.Join(t.TempDir(), "deadline")
			env := []string{"PATH=" + os.Getenv("PATH"), "BOX_DEADLINE_FILE=" + file}
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				if n, err := strconv.ParseInt(strings.TrimPrefix(v, "+"), 10, 64); err == nil && strings.HasPrefix(v, "+") {
					kv = k + "=" + strconv.FormatInt(time.Now().Unix()+n, 10)
				}
				if v, ok := strings.CutPrefix(kv, "moved="); ok {
					if err := os.WriteFile(file, []byte(v+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				env = append(env, kv)
			}
			cmd.Env = env
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				// Killed by a signal counts as 128+signal, as tini reports it.
				code = ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal())
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || took < tt.min || took > tt.max {
				t.Errorf("box-init %v = exit %d after %v, want %d within [%v, %v]; output %q",
					tt.args, code, took.Round(time.Millisecond), tt.wantCode, tt.min, tt.max, out)
			}
		})
	}
}
