package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/internal/leftover"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Spares. A harness.Prestarter's CLI spends most of a short turn's time
// to its first event starting up (Claude Code: about 0.7 s of 0.8 s with
// an instant model). The engine keeps such a process started ahead, a
// spare, for the turn it expects next, and hands that turn to it:
//
//   - the next turn of a session whose one-shot turn just completed
//     (the spare resumes the session), and
//   - the first turn of a new session with the settings of the last
//     completed turn, or of the engine's Prestart template before any.
//
// A spare is taken only by a turn whose settings (harness, binary, model,
// system prompt, working directory, environment, effort, model endpoint)
// are the ones it was started with; any other turn starts its own process
// and the spare waits on. A new session's spare has a state directory of
// its own, which becomes the session's when a turn takes it. Spares are
// not confined (a confined turn starts its own), live SessionIdleTimeout
// at most, are at most maxSpares, and carry a marker of their own that a
// restarted engine kills.
//
// A spare is optional work: with Options.Quiet it starts only once the
// machine is quiet (in a box, the kernel's pressure stall information),
// so that a burst of box starts or claims, or the turns of neighbours, do
// not wait on a hundred harnesses starting at once; a turn admitted
// during the wait supersedes it.

// maxSpares bounds the spares kept at once: the next turn of the last
// session, and the first of a new one.
const maxSpares = 2

// spare is a harness process started ahead of its turn.
type spare struct {
	key      spareSettings
	session  string // the session a resuming spare resumes
	proc     *process
	spec     harness.Command
	stateDir string // a new session's spare: its own state directory
	timer    *time.Timer
}

// SpareTemplate are the settings of the turn a new session is expected to
// start with: the box's harness, its model and working directory.
type SpareTemplate struct {
	Backend *Backend
	Model   string
	Cwd     string
}

// spareMarker marks the spares' processes (MarkerVar) for a restarted
// engine of the same data directory to find them.
func (e *Engine) spareMarker() string {
	sum := sha256.Sum256([]byte(e.opts.DataDir))
	return MarkerVar + "=spare-" + hex.EncodeToString(sum[:8])
}

// killLeftoverSpares kills the spares a previous engine of the same data
// directory left.
func (e *Engine) killLeftoverSpares() {
	flag := e.sparesFlag()
	if _, err := os.Stat(flag); err != nil {
		return // none was started: /proc is not read
	}
	if n := leftover.Kill(e.opts.ProcDir, []leftover.Group{{Marker: e.spareMarker()}}); n[0] > 0 {
		e.log.Info("killed the spare harness processes of the previous bridge", "processes", n[0])
	}
	_ = os.Remove(flag)
}

// sparesFlag is the file whose presence says spares were started with
// this data directory.
func (e *Engine) sparesFlag() string { return filepath.Join(e.opts.DataDir, "spares-started") }

// spareSettings are the settings a spare is started with: a turn with
// the same ones takes it. Native is the native session it resumes (""
// for a new session); System and Env are JSON documents.
type spareSettings struct {
	Harness, Bin, Model, Native, System, Cwd, Env, Effort, Router string
}

// spareKey is the settings of a spare for a turn with these.
func spareKey(b *Backend, model, native string, system []wire.Message, cwd string, env map[string]string, effort, routerURL string) spareSettings {
	keys := slices.Sorted(maps.Keys(env))
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k, env[k]}
	}
	sys, _ := json.Marshal(system)
	envDoc, _ := json.Marshal(pairs)
	return spareSettings{Harness: b.Adapter.Name(), Bin: b.Bin, Model: model, Native: native, System: string(sys),
		Cwd: cwd, Env: string(envDoc), Effort: effort, Router: routerURL}
}

// changed names the settings of s that differ from o's
// (wire.HarnessStart.Changed).
func (s spareSettings) changed(o spareSettings) []string {
	return changedSettings(
		setting{"harness", s.Harness, o.Harness}, setting{"binary", s.Bin, o.Bin}, setting{"model", s.Model, o.Model},
		setting{"session", s.Native, o.Native}, setting{"system", s.System, o.System}, setting{"cwd", s.Cwd, o.Cwd},
		setting{"env", s.Env, o.Env}, setting{"effort", s.Effort, o.Effort}, setting{"model_endpoint", s.Router, o.Router})
}

// systemMessages are the system messages of msgs (what a spare knows of
// its turn's prompt).
func systemMessages(msgs []wire.Message) []wire.Message {
	var out []wire.Message
	for _, m := range msgs {
		if m.Role == "system" {
			out = append(out, m)
		}
	}
	return out
}

// takeSpare removes and returns the live spare of key, or nil and why
// there is none (wire.HarnessStart). A session's turn is compared with the
// spare resuming it (the same native session), a new session's with the
// newest new session's spare, ended ones of the last Bind included.
func (e *Engine) takeSpare(key spareSettings) (*spare, wire.HarnessStart) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := slices.IndexFunc(e.spares, func(s *spare) bool { return s.key == key })
	if i < 0 {
		why := wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartNoneReady}
		if r := slices.Index(e.rebound, key); r >= 0 {
			// A spare of these settings was ended for the claim's
			// environment: said once, later turns had the time a spare
			// takes.
			e.rebound = slices.Delete(e.rebound, r, r+1)
			why.Reason = wire.StartEnvironmentChanged
			return nil, why
		}
		// The spare this turn would have taken, had its settings been
		// the turn's: the session's, or the newest for a new session.
		var near []spareSettings
		for _, s := range slices.Backward(e.spares) {
			near = append(near, s.key)
		}
		near = append(near, e.rebound...)
		j := slices.IndexFunc(near, func(k spareSettings) bool {
			if key.Native != "" {
				return k.Native == key.Native
			}
			return k.Native == ""
		})
		if j >= 0 {
			why.Reason, why.Changed = wire.StartSettingsChanged, key.changed(near[j])
		}
		return nil, why
	}
	s := e.spares[i]
	e.spares = slices.Delete(e.spares, i, i+1)
	s.timer.Stop()
	select {
	case <-s.proc.exited:
		return nil, wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartExited}
	default:
	}
	return s, wire.HarnessStart{Process: wire.HarnessSpare}
}

// endSpare ends a spare's process and removes what it had of its own.
func (e *Engine) endSpare(s *spare) {
	s.timer.Stop()
	s.proc.closeStdin()
	_ = killGroup(s.proc.pgid, syscall.SIGKILL)
	go func() {
		<-s.proc.exited
		if s.stateDir != "" {
			_ = os.RemoveAll(s.stateDir)
		}
	}()
}

// endSessionSpares ends the spares resuming session: a turn of it is
// starting, after which they would resume a conversation it moved past.
func (e *Engine) endSessionSpares(session string) {
	e.mu.Lock()
	var stale []*spare
	e.spares = slices.DeleteFunc(e.spares, func(s *spare) bool {
		if s.session == session {
			stale = append(stale, s)
			return true
		}
		return false
	})
	e.mu.Unlock()
	for _, s := range stale {
		e.endSpare(s)
	}
}

// endSpares ends every spare (Close).
func (e *Engine) endSpares() {
	e.mu.Lock()
	spares := e.spares
	e.spares = nil
	e.mu.Unlock()
	for _, s := range spares {
		e.endSpare(s)
	}
}

// prestart starts a spare for a turn with these settings, unless one is
// kept for them already or the engine is closed; it does not wait for
// the process. native is the session's native id ("" for a new one);
// sessionID the session it resumes.
func (e *Engine) prestart(b *Backend, sessionID, native string, req StartRequest) {
	ps, ok := b.Adapter.(harness.Prestarter)
	if !ok || !e.opts.Spares || e.jail.Resolve(req.Confine).Active() {
		return
	}
	system := systemMessages(req.Messages)
	key := spareKey(b, req.Model, native, system, req.Cwd, req.Env, req.Effort, e.opts.RouterURL)
	e.mu.Lock()
	if e.closed || slices.ContainsFunc(e.spares, func(s *spare) bool { return s.key == key }) {
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	// The environment it starts with: a Bind meanwhile makes it stale.
	bd := e.bound.Load()
	name := b.Adapter.Name()
	s := &spare{key: key}
	if native != "" {
		s.session = sessionID
	}
	var stateDir string
	var err error
	if native == "" {
		// A new session's: a directory of its own, the session's once a
		// turn takes it.
		stateDir, err = e.sessionDir(name, "spare-"+rand.Text())
		s.stateDir = stateDir
	} else {
		stateDir, err = e.sessionDir(name, sessionID)
	}
	if err != nil {
		e.log.Warn("spare harness", "err", err)
		return
	}
	turn := harness.Turn{Bin: b.Bin, Model: req.Model, Messages: system, NativeSessionID: native, Cwd: req.Cwd,
		StateDir: stateDir, Environ: bd.environ, Env: req.Env, RouterURL: e.opts.RouterURL, RouterKey: e.opts.RouterKey,
		Effort: req.Effort}
	spec, err := ps.SpareCommand(turn)
	if err == nil {
		err = harness.WriteFiles(spec.Files)
	}
	if err == nil {
		err = os.WriteFile(e.sparesFlag(), nil, 0o600)
	}
	if err == nil {
		s.proc, err = e.spawn(name, spec, e.spareMarker())
	}
	if err != nil {
		// A template the harness cannot start (Pi without a model) is
		// no fault: the turn starts its own process.
		e.log.Debug("no spare harness", "harness", name, "err", redact(err.Error(), e.secrets()))
		if s.stateDir != "" {
			_ = os.RemoveAll(s.stateDir)
		}
		return
	}
	s.spec = spec
	s.timer = time.AfterFunc(e.opts.SessionIdleTimeout, func() {
		e.mu.Lock()
		i := slices.Index(e.spares, s)
		if i >= 0 {
			e.spares = slices.Delete(e.spares, i, i+1)
		}
		e.mu.Unlock()
		if i >= 0 {
			e.endSpare(s)
		}
	})
	e.mu.Lock()
	if e.closed || !slices.Equal(e.bound.Load().environ, bd.environ) || slices.ContainsFunc(e.spares, func(o *spare) bool { return o.key == key }) {
		e.mu.Unlock()
		e.endSpare(s)
		return
	}
	e.spares = append(e.spares, s)
	e.rebound = slices.DeleteFunc(e.rebound, func(k spareSettings) bool { return k == key })
	var old *spare
	if len(e.spares) > maxSpares {
		old = e.spares[0]
		e.spares = e.spares[1:]
	}
	e.mu.Unlock()
	if old != nil {
		e.endSpare(old)
	}
	e.log.Debug("spare harness started", "harness", name, "pgid", s.proc.pgid, "resumes", native != "")
}

// Prestart starts a spare for the first turn of a new session made as t
// says (the box's harness), when its adapter can take a turn that way,
// PrestartDelay after the engine's start unless a turn came first.
func (e *Engine) Prestart(t SpareTemplate) {
	e.mu.Lock()
	e.template = t
	e.mu.Unlock()
	e.prestartTemplate(t, e.opts.PrestartDelay)
}

// prestartTemplate starts t's spare after delay, in the background.
func (e *Engine) prestartTemplate(t SpareTemplate, delay time.Duration) {
	if t.Backend == nil {
		return
	}
	go func() {
		<-e.ready
		if e.startErr != nil {
			return
		}
		time.Sleep(delay)
		if !e.quiet(0) {
			return // the turns' spares follow their settings
		}
		e.prestart(t.Backend, "", "", StartRequest{Backend: t.Backend, Model: t.Model, Cwd: t.Cwd})
	}()
}

// adoptSpare hands turn to the spare kept for its settings, if there is
// one: its input is written and its stdin closed. It returns the process
// and its marker, or nil; x.start says which, and why.
func (x *oneShot) adoptSpare(turn harness.Turn, native string) (*process, string, harness.Command) {
	e, req := x.e, x.req
	b := req.Backend
	x.start = wire.HarnessStart{Process: wire.HarnessStarted}
	ps, ok := b.Adapter.(harness.Prestarter)
	switch {
	case !ok:
		x.start.Reason = wire.StartNotSupported
	case e.jail.Resolve(req.Confine).Active():
		x.start.Reason = wire.StartConfined
	case !e.opts.Spares:
		x.start.Reason = wire.StartDisabled
	}
	if x.start.Reason != "" {
		return nil, "", harness.Command{}
	}
	key := spareKey(b, req.Model, native, systemMessages(req.Messages), req.Cwd, req.Env, req.Effort, e.opts.RouterURL)
	s, why := e.takeSpare(key)
	if x.start = why; s == nil {
		return nil, "", harness.Command{}
	}
	// Until the spare took the turn.
	x.start = wire.HarnessStart{Process: wire.HarnessStarted, Reason: wire.StartSpareFailed}
	if s.stateDir != "" {
		// The new session's state is the spare's: its directory under
		// the session's name.
		dir := e.sessionDirPath(b.Adapter.Name(), req.SessionID)
		_ = os.Remove(dir) // made empty for the turn; a session's state stays
		if err := os.Symlink(s.stateDir, dir); err != nil {
			x.log.Debug("spare not taken", "err", err)
			e.endSpare(s)
			return nil, "", harness.Command{}
		}
		s.stateDir = "" // the session's now
	}
	input, hold, err := ps.SpareInput(turn)
	if err == nil {
		err = s.proc.writeStdin(input)
	}
	if err != nil {
		x.log.Debug("spare not taken", "err", err)
		e.endSpare(s)
		return nil, "", harness.Command{}
	}
	if !hold {
		s.proc.closeStdin()
	}
	x.start = wire.HarnessStart{Process: wire.HarnessSpare}
	e.stats.spareTurns.Add(1)
	return s.proc, e.spareMarker(), s.spec
}

// spareWait bounds the wait for a quiet machine: a spare not started by
// then is not started.
const spareWait = 2 * time.Minute

// quiet waits until the machine is quiet (Options.Quiet) and reports
// whether a spare may start then: the engine is open and has admitted no
// turn beyond the first admitted (a later turn's settings and state
// supersede the ones the spare was for).
func (e *Engine) quiet(admitted int) bool {
	if q := e.opts.Quiet; q != nil {
		ctx, cancel := context.WithTimeout(e.life, spareWait)
		err := q(ctx)
		cancel()
		if err != nil {
			e.log.Debug("no spare harness: the machine stayed busy", "err", err)
			return false
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.closed && e.admitted == admitted
}

// prestartAfter starts the spares a completed one-shot turn makes
// likely: the session's next turn, and a new session's first; admitted
// is the engine's count of admitted turns when the turn completed.
func (x *oneShot) prestartAfter(admitted int) {
	e, req := x.e, x.req
	if !e.quiet(admitted) {
		return
	}
	name := req.Backend.Adapter.Name()
	native, err := e.store.NativeSession(context.Background(), req.SessionID, name)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			x.log.Debug("spare harness", "err", err)
		}
		return
	}
	e.prestart(req.Backend, req.SessionID, native, req)
	e.prestart(req.Backend, "", "", req)
}
