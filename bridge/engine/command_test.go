package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// shAdapter runs a shell script as its harness, with the Command
// extensions an adapter may use: generated files, a held stdin, its own
// parser.
type shAdapter struct {
	script string
	stdin  string
	hold   bool
	files  func(stateDir string) []harness.File
}

func (shAdapter) Name() string              { return "sh" }
func (shAdapter) Key() string               { return "sh" }
func (shAdapter) DefaultBin() string        { return "/bin/sh" }
func (shAdapter) Models() []string          { return []string{"default"} }
func (shAdapter) NewParser() harness.Parser { return &lineParser{prefix: "default:"} }
func (a shAdapter) Command(t harness.Turn) (harness.Command, error) {
	c := harness.Command{Path: "/bin/sh", Args: []string{"-c", a.script}, Env: []string{"STATE=" + t.StateDir, "PATH=/usr/bin:/bin"},
		Stdin: []byte(a.stdin), HoldStdin: a.hold, Parser: &lineParser{prefix: "custom:"}}
	if a.files != nil {
		c.Files = a.files(t.StateDir)
	}
	return c, nil
}

// lineParser reports each line as text with its prefix, "END" as the
// end, and the last line as its diagnosis.
type lineParser struct {
	prefix string
	last   string
	done   bool
}

func (p *lineParser) Line(b []byte) []harness.Event {
	p.last = string(b)
	if p.last == "END" {
		p.done = true
		return []harness.Event{{Kind: harness.KindEnd, Finish: "stop"}}
	}
	return []harness.Event{{Kind: harness.KindText, Text: p.prefix + p.last}}
}
func (p *lineParser) Done() bool        { return p.done }
func (p *lineParser) Diagnosis() string { return "last line " + p.last }

func TestEngine_CommandExtensions(t *testing.T) {
	f := newFixture(t, Options{})
	// The script answers its first stdin line, ends the turn, then waits
	// for stdin to close before it records that it saw the close.
	f.backend = &Backend{Adapter: shAdapter{
		script: `read line; echo "got $line"; cat "$STATE/conf/gen.txt"; echo; echo END; cat >/dev/null; echo closed > "$STATE/closed"`,
		stdin:  "hello\n", hold: true,
		files: func(dir string) []harness.File {
			return []harness.File{{Path: filepath.Join(dir, "conf", "gen.txt"), Data: []byte("generated")}}
		},
	}, Bin: "/bin/sh"}
	f.start(t, "ext", "x")
	frames := readAll(t, f.e, "ext", 0)
	run := waitRun(t, f, "ext")
	text := strings.Join(frames, "\n")
	for _, want := range []string{"custom:got hello", "custom:generated"} {
		if !strings.Contains(text, want) {
			t.Errorf("frames = %s, want %q (the turn's own parser, the generated file)", text, want)
		}
	}
	if strings.Contains(text, "default:") || run.Status != "done" {
		t.Errorf("status %s, frames %s; want done, parsed by the command's parser", run.Status, text)
	}
	state, err := f.e.sessionDir("sh", "ses-ext")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(state, "conf", "gen.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("generated file: %v, mode %v; want 0600", err, fi)
	}
	// The held stdin is closed at the end of the turn, so the script
	// finishes within the result grace.
	polltest.Until(t, 5*time.Second, "the harness to see its held stdin close", func() bool {
		_, err := os.Stat(filepath.Join(state, "closed"))
		return err == nil
	})
}

func TestEngine_TimeoutDiagnosis(t *testing.T) {
	f := newFixture(t, Options{})
	f.backend = &Backend{Adapter: shAdapter{script: `echo "Reconnecting 1/5"; exec sleep 30`}, Bin: "/bin/sh", Timeout: 500 * time.Millisecond}
	f.start(t, "diag", "x")
	e := lastError(t, readAll(t, f.e, "diag", 0))
	if e.Type != "harness_timeout" || !strings.Contains(e.Message, "; last line Reconnecting 1/5") {
		t.Errorf("error = %+v, want a harness_timeout with the parser's diagnosis", e)
	}
}
