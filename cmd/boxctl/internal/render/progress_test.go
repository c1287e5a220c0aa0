package render_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"
	"github.com/tangle-network/boxctl/conformance"
)

func TestProgressView(t *testing.T) {
	replay := conformance.Case{ID: "session.replay-cursor"}
	perm := conformance.Case{ID: "interaction.permission"}
	start := func(h string, c conformance.Case) conformance.Progress {
		return conformance.Progress{Case: c, Harness: h}
	}
	done := func(h string, c conformance.Case, r conformance.Result) conformance.Progress {
		return conformance.Progress{Case: c, Harness: h, Result: &r}
	}
	tests := []struct {
		name     string
		terminal bool
		reports  []conformance.Progress
		want     string
	}{
		{
			name: "a pass, a failure with evidence, a case that does not apply",
			reports: []conformance.Progress{
				start("pi", replay), start("pi", perm),
				done("pi", replay, conformance.Result{Outcome: conformance.Pass, Seconds: 1.25}),
				done("pi", perm, conformance.Result{Outcome: conformance.NotApplicable, Capability: "interactions.permission", Seconds: 0}),
				start("claude", replay),
				done("claude", replay, conformance.Result{Outcome: conformance.Fail, Seconds: 3,
					Evidence: &conformance.Evidence{Got: "events\n 3  and 4"}}),
			},
			want: "pass  pi/session.replay-cursor                        1.2s\n" +
				"n/a   pi/interaction.permission                       0.0s  needs interactions.permission\n" +
				"FAIL  claude/session.replay-cursor                    3.0s  got events 3 and 4\n",
		},
		{
			name: "a cleanup failure",
			reports: []conformance.Progress{
				done("pi", replay, conformance.Result{Outcome: conformance.Fail, Cleanup: []string{"box b1 left behind", "x"}}),
			},
			want: "FAIL  pi/session.replay-cursor                        0.0s  cleanup: box b1 left behind\n",
		},
		{
			name:     "on a terminal, the status line is drawn and erased",
			terminal: true,
			reports: []conformance.Progress{
				start("pi", replay),
				done("pi", replay, conformance.Result{Outcome: conformance.Pass, Seconds: 2}),
			},
			want: "running 1 · passed 0 · failed 0 · n/a 0 · pi/session.replay-cursor" + "\r\x1b[K" +
				"pass  pi/session.replay-cursor                        2.0s\n" +
				"running 0 · passed 1 · failed 0 · n/a 0" + "\r\x1b[K",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			v := render.NewProgressView(&buf, tt.terminal)
			for _, p := range tt.reports {
				v.Update(p)
			}
			v.Close()
			if buf.String() != tt.want {
				t.Errorf("view wrote\n%q\nwant\n%q", buf.String(), tt.want)
			}
		})
	}
}

// TestIsTerminal: neither a buffer nor a regular file is a terminal.
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if render.IsTerminal(&bytes.Buffer{}) || render.IsTerminal(f) {
		t.Error("IsTerminal of a buffer or a regular file = true")
	}
}
