package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// TestEngine_Spares: a completed turn leaves a process started ahead for
// its session's next turn and one for a new session's first; a turn with
// those settings is served by it (its process carries the spares'
// marker), a turn with other settings starts its own (and the spares
// follow its settings from then on), the new session's state is the
// spare's, and Close ends the spares.
func TestEngine_Spares(t *testing.T) {
	f := newFixture(t, Options{Spares: true})
	waitSpares := func(n int) {
		t.Helper()
		polltest.Until(t, 10*time.Second, "the spares", func() bool { return f.e.Stats().Spares == n })
	}
	turn := func(id, session string, mod ...func(*StartRequest)) store.Run {
		t.Helper()
		f.start(t, id, "hello", append(mod, func(r *StartRequest) { r.SessionID = session })...)
		r := waitRun(t, f, id)
		if r.Status != store.StatusDone {
			t.Fatalf("run %s = %s %s %q", id, r.Status, r.ErrType, r.ErrMessage)
		}
		return r
	}
	isSpare := func(r store.Run) bool { return strings.HasPrefix(r.Marker, MarkerVar+"=spare-") }

	if r := turn("one", "ses-a"); isSpare(r) {
		t.Errorf("the first turn ran in a spare (%s)", r.Marker)
	}
	wantStart(t, f.st, "one", wire.HarnessStarted, wire.StartNoneReady)
	waitSpares(2)
	if r := turn("two", "ses-a"); !isSpare(r) {
		t.Errorf("the session's next turn has marker %q, want a spare's", r.Marker)
	}
	wantStart(t, f.st, "two", wire.HarnessSpare, "")
	waitSpares(2)
	// Another model: a process of its own, the spares left waiting.
	if r := turn("three", "ses-b", func(r *StartRequest) { r.Model = "opus" }); isSpare(r) {
		t.Errorf("a turn with another model ran in a spare")
	}
	wantStart(t, f.st, "three", wire.HarnessStarted, wire.StartSettingsChanged, "model")
	// The spares now follow the last turn's settings.
	opus := f.request("four", "hello")
	opusKey := spareKey(f.backend, "opus", "", nil, opus.Cwd, opus.Env, opus.Effort, f.e.opts.RouterURL)
	polltest.Until(t, 10*time.Second, "a spare for a new session of the other model", func() bool { return hasSpare(f.e, opusKey) })
	fresh := turn("four", "ses-c", func(r *StartRequest) { r.Model = "opus" })
	if !isSpare(fresh) {
		t.Errorf("a new session's first turn has marker %q, want a spare's", fresh.Marker)
	}
	wantStart(t, f.st, "four", wire.HarnessSpare, "")
	// The new session's state directory is the spare's.
	dir := f.e.sessionDirPath("claude-code", "ses-c")
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("session state %s: %v, %v; want the spare's directory linked", dir, fi, err)
	}
	if got := f.e.Stats().SpareTurns; got != 2 {
		t.Errorf("SpareTurns = %d, want 2", got)
	}
	waitSpares(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "the spares to end with Close", func() bool {
		return leftoverSpares(f.e) == 0
	})
}

// wantStart checks what the store says of how run id's harness process
// came to serve it.
func wantStart(t *testing.T, st *store.Store, id, process, reason string, changed ...string) {
	t.Helper()
	got, err := st.RunHarness(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.HarnessStart{Process: process, Reason: reason, Changed: changed}
	if got == nil || got.Process != want.Process || got.Reason != want.Reason || !slices.Equal(got.Changed, want.Changed) {
		t.Errorf("run %s: harness %+v, want %+v", id, got, want)
	}
}

// hasSpare reports whether e keeps a spare of key.
func hasSpare(e *Engine, key spareSettings) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.spares, func(s *spare) bool { return s.key == key })
}

// leftoverSpares counts the live processes marked as e's spares.
func leftoverSpares(e *Engine) int {
	return countMarked(e.opts.ProcDir, e.spareMarker())
}

func countMarked(procDir, marker string) int {
	n := 0
	names, _ := filepath.Glob(filepath.Join(procDir, "[0-9]*", "environ"))
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for kv := range strings.SplitSeq(string(b), "\x00") {
			if kv == marker {
				if st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
					n++
				}
			}
		}
	}
	return n
}

// TestEngine_SparesOfAPredecessor: an engine started on the data
// directory of one that left spares (a crash) kills them.
func TestEngine_SparesOfAPredecessor(t *testing.T) {
	f := newFixture(t, Options{Spares: true})
	f.start(t, "one", "hello")
	waitRun(t, f, "one")
	polltest.Until(t, 10*time.Second, "the spares", func() bool { return f.e.Stats().Spares == 2 })
	if n := leftoverSpares(f.e); n < 2 {
		t.Fatalf("%d spare processes, want 2", n)
	}
	// The next incarnation, while the first one's processes still run.
	e2, err := New(context.Background(), f.st, Options{DataDir: f.e.opts.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close(context.Background())
	if err := e2.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := leftoverSpares(f.e); n != 0 {
		t.Errorf("%d spares of the previous engine left running", n)
	}
	if _, err := os.Stat(e2.sparesFlag()); !os.IsNotExist(err) {
		t.Errorf("the spares flag is still there: %v", err)
	}
}

// TestEngine_Prestart: the template's spare starts after the delay and
// serves the first turn of its settings.
func TestEngine_Prestart(t *testing.T) {
	f := newFixture(t, Options{Spares: true, PrestartDelay: 10 * time.Millisecond})
	f.e.Prestart(SpareTemplate{Backend: f.backend, Model: "sonnet"})
	polltest.Until(t, 10*time.Second, "the template's spare", func() bool { return f.e.Stats().Spares == 1 })
	f.start(t, "first", "hello")
	if r := waitRun(t, f, "first"); r.Status != store.StatusDone || !strings.HasPrefix(r.Marker, MarkerVar+"=spare-") {
		t.Errorf("the first turn = %s, marker %q; want done in the template's spare", r.Status, r.Marker)
	}
}

// TestEngine_SparesOfASession: a turn of a session ends the spare that
// resumes it, whatever the turn's settings: that spare loaded the
// conversation before the turn moved it on.
func TestEngine_SparesOfASession(t *testing.T) {
	f := newFixture(t, Options{Spares: true})
	f.start(t, "one", "hello", func(r *StartRequest) { r.SessionID = "ses-a" })
	waitRun(t, f, "one")
	native, err := f.st.NativeSession(context.Background(), "ses-a", "claude-code")
	if err != nil {
		t.Fatal(err)
	}
	req := f.request("x", "hello")
	key := spareKey(f.backend, req.Model, native, nil, req.Cwd, req.Env, req.Effort, f.e.opts.RouterURL)
	hasKey := func() bool {
		f.e.mu.Lock()
		defer f.e.mu.Unlock()
		return slices.ContainsFunc(f.e.spares, func(s *spare) bool { return s.key == key })
	}
	polltest.Until(t, 10*time.Second, "the spare resuming ses-a", hasKey)
	f.start(t, "two", "hello", func(r *StartRequest) { r.SessionID, r.Model = "ses-a", "haiku" })
	if r := waitRun(t, f, "two"); r.Status != store.StatusDone || strings.HasPrefix(r.Marker, MarkerVar+"=spare-") {
		t.Errorf("the turn with another model = %s, marker %q; want done in its own process", r.Status, r.Marker)
	}
	wantStart(t, f.st, "two", wire.HarnessStarted, wire.StartSettingsChanged, "model")
	if hasKey() {
		t.Error("the spare resuming ses-a outlived a turn of ses-a")
	}
}

// TestEngine_SparesWaitForQuiet: spares start only once Options.Quiet
// lets them; a spare whose wait ends in a busy machine, or during which a
// turn was admitted, is never started; Close ends the waits.
func TestEngine_SparesWaitForQuiet(t *testing.T) {
	gate := make(chan error)
	waits := make(chan struct{}, 8)
	quiet := func(ctx context.Context) error {
		waits <- struct{}{}
		select {
		case err := <-gate:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := newFixture(t, Options{Spares: true, PrestartDelay: -1, Quiet: quiet})
	wantSpares := func(n int) {
		t.Helper()
		polltest.Until(t, 10*time.Second, "the spares", func() bool { return f.e.Stats().Spares == n })
	}
	// The template's spare waits; a busy machine until the end: none.
	f.e.Prestart(SpareTemplate{Backend: f.backend, Model: "sonnet"})
	<-waits
	gate <- context.DeadlineExceeded
	// A turn; its spares wait, and start once the machine is quiet.
	f.start(t, "one", "hello", func(r *StartRequest) { r.SessionID = "ses-a" })
	if r := waitRun(t, f, "one"); r.Status != store.StatusDone || strings.HasPrefix(r.Marker, MarkerVar+"=spare-") {
		t.Fatalf("run one = %s, marker %q; want done in a process of its own", r.Status, r.Marker)
	}
	<-waits
	if n := f.e.Stats().Spares; n != 0 {
		t.Fatalf("%d spares before the machine was quiet", n)
	}
	gate <- nil
	wantSpares(2)
	// Another turn is admitted while the next turn's spares wait: they
	// are not started when the wait ends.
	f.start(t, "two", "hello", func(r *StartRequest) { r.SessionID = "ses-a" })
	waitRun(t, f, "two")
	<-waits
	f.start(t, "three", "hello", func(r *StartRequest) { r.SessionID = "ses-b"; r.Model = "opus" })
	waitRun(t, f, "three")
	<-waits
	gate <- nil // two's wait, superseded by three
	gate <- nil // three's
	opus := f.request("x", "hello")
	opusKey := spareKey(f.backend, "opus", "", nil, opus.Cwd, opus.Env, opus.Effort, f.e.opts.RouterURL)
	polltest.Until(t, 10*time.Second, "three's spares", func() bool { return hasSpare(f.e, opusKey) })
	f.e.mu.Lock()
	for _, s := range f.e.spares {
		if s.session == "ses-a" {
			t.Errorf("a spare resumes ses-a, though ses-b's turn was admitted during its wait")
		}
	}
	f.e.mu.Unlock()
	// A wait pending at Close ends with it.
	f.start(t, "four", "hello", func(r *StartRequest) { r.SessionID = "ses-c" })
	waitRun(t, f, "four")
	<-waits
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "the spares to end with Close", func() bool { return leftoverSpares(f.e) == 0 })
}

// TestEngine_Bind: a claim's Bind keeps the spare started before it when
// the harnesses' environment is the same, and replaces it with one of the
// claim's environment when it is not; the claim's secrets are redacted
// from then on.
func TestEngine_Bind(t *testing.T) {
	f := newFixture(t, Options{Spares: true, PrestartDelay: -1, Environ: []string{"BIND_TEST=standby"}})
	f.e.Prestart(SpareTemplate{Backend: f.backend, Cwd: f.dir})
	only := func(want string) *spare {
		t.Helper()
		var s *spare
		polltest.UntilNil(t, 10*time.Second, "the spare of "+want, func() error {
			f.e.mu.Lock()
			defer f.e.mu.Unlock()
			if len(f.e.spares) != 1 {
				return fmt.Errorf("%d spares", len(f.e.spares))
			}
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", f.e.spares[0].proc.pgid))
			if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), want) {
				return fmt.Errorf("the spare's environment lacks %s (%v)", want, err)
			}
			s = f.e.spares[0]
			return nil
		})
		return s
	}
	before := only("BIND_TEST=standby")
	f.e.Bind([]string{"BIND_TEST=standby"}, "claim-bearer")
	if s := only("BIND_TEST=standby"); s != before {
		t.Fatal("a Bind with the same environment replaced the spare")
	}
	if !slices.Contains(f.e.secrets(), "claim-bearer") || !slices.Contains(f.e.secrets(), routerKey) {
		t.Errorf("secrets after Bind = %d, want the claim's added to the engine's", len(f.e.secrets()))
	}
	f.e.Bind([]string{"BIND_TEST=claimed"}, "")
	after := only("BIND_TEST=claimed")
	if after == before {
		t.Fatal("the spare of the standby's environment was kept")
	}
	polltest.Until(t, 10*time.Second, "the standby's spare to end", func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", before.proc.pgid))
		return err != nil
	})
	if slices.Contains(f.e.secrets(), "") {
		t.Error("an empty secret was added")
	}
}

// TestEngine_BindRestart: after a claim's Bind ended the spare of
// another environment, before its successor started, a turn of the
// ended spare's settings says the environment changed (once: a later one
// says none was ready), and a turn of other settings names the settings
// that differ from the ended spare's.
func TestEngine_BindRestart(t *testing.T) {
	var quiets atomic.Int32
	// The first spare starts; every later one finds the machine busy.
	quiet := func(context.Context) error {
		if quiets.Add(1) > 1 {
			return context.DeadlineExceeded
		}
		return nil
	}
	f := newFixture(t, Options{Spares: true, PrestartDelay: -1, Quiet: quiet, Environ: []string{"BIND_TEST=standby"}})
	f.e.Prestart(SpareTemplate{Backend: f.backend, Model: "sonnet", Cwd: f.dir})
	polltest.Until(t, 10*time.Second, "the template's spare", func() bool { return f.e.Stats().Spares == 1 })
	f.e.Bind([]string{"BIND_TEST=claimed"})
	polltest.Until(t, 10*time.Second, "the spare to end", func() bool { return f.e.Stats().Spares == 0 && quiets.Load() > 1 })
	for _, c := range []struct {
		run, model, reason string
		changed            []string
	}{
		{"zero", "opus", wire.StartSettingsChanged, []string{"model"}},
		{"one", "sonnet", wire.StartEnvironmentChanged, nil},
		{"two", "sonnet", wire.StartNoneReady, nil},
	} {
		f.start(t, c.run, "hello", func(r *StartRequest) { r.Cwd, r.Model = f.dir, c.model })
		waitRun(t, f, c.run)
		wantStart(t, f.st, c.run, wire.HarnessStarted, c.reason, c.changed...)
	}
}

// TestHarnessStart_Changed: the settings named as changed are the ones
// that differ.
func TestHarnessStart_Changed(t *testing.T) {
	base := spareSettings{Harness: "claude-code", Bin: "claude", Model: "sonnet", System: "null", Cwd: "/w", Env: "[]", Router: "http://r"}
	for _, c := range []struct {
		mod  func(*spareSettings)
		want []string
	}{
		{func(*spareSettings) {}, nil},
		{func(s *spareSettings) { s.Model = "opus" }, []string{"model"}},
		{func(s *spareSettings) { s.Env = `[["A","1"]]`; s.Cwd = "/x" }, []string{"cwd", "env"}},
		{func(s *spareSettings) { s.System = `[{"role":"system"}]`; s.Effort = "high" }, []string{"system", "effort"}},
		{func(s *spareSettings) { s.Bin, s.Native = "claude2", "n1" }, []string{"binary", "session"}},
	} {
		s := base
		c.mod(&s)
		if got := s.changed(base); !slices.Equal(got, c.want) {
			t.Errorf("%+v: changed %q, want %q", s, got, c.want)
		}
	}
	p := turnFingerprint(harness.Turn{Bin: "claude", Model: "sonnet", Env: map[string]string{"A": "1"}}, "")
	q := turnFingerprint(harness.Turn{Bin: "claude", Model: "opus", Env: map[string]string{"A": "2"}}, "jail-1")
	if got, want := q.changed(p), []string{"model", "env", "confinement"}; !slices.Equal(got, want) {
		t.Errorf("session process: changed %q, want %q", got, want)
	}
	if got := p.changed(turnFingerprint(harness.Turn{Bin: "claude", Model: "sonnet", Env: map[string]string{"A": "1"}}, "")); got != nil {
		t.Errorf("the same turn: changed %q", got)
	}
}
