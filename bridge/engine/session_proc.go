package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// sessionProc is the long-lived harness process of a retained session
// (harness.Persistent). Ownership: while a turn runs, the run's goroutine
// owns it and it is out of the engine's registry; between turns it sits
// in retainedState.procs with an idle timer, and whoever removes it from
// there (the next turn, the timer, EndSession, Close) owns it.
type sessionProc struct {
	key  string
	proc *process
	// marker is the environment entry the process was started with; the
	// runs it serves record it for crash recovery.
	marker string
	// fingerprint names what the process was started for (binary, model,
	// directory, environment, confinement): a turn asking for something
	// else gets a fresh process.
	fingerprint procSettings
	// conv drives the process for a harness.Conversant adapter (nil
	// otherwise).
	conv harness.Conversation
	idle *time.Timer
	// idleSince is when it last entered the registry.
	idleSince time.Time
	endOnce   sync.Once
}

// sessionProcKey is the registry key of a session's process.
func sessionProcKey(harnessName, sessionID string) string { return harnessName + "\x00" + sessionID }

// procSettings are what a session's process depends on in a turn.
type procSettings struct {
	Bin, Model, Cwd, StateDir, Env, Confine string
}

// turnFingerprint is what a session's process depends on in a turn
// confined by confine (jail.Prepared.Key).
func turnFingerprint(t harness.Turn, confine string) procSettings {
	env := make([]string, 0, len(t.Env))
	for k, v := range t.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return procSettings{Bin: t.Bin, Model: t.Model, Cwd: t.Cwd, StateDir: t.StateDir, Env: fmt.Sprintf("%q", env), Confine: confine}
}

// changed names the settings of p that differ from o's
// (wire.HarnessStart.Changed).
func (p procSettings) changed(o procSettings) []string {
	return changedSettings(
		setting{"binary", p.Bin, o.Bin}, setting{"model", p.Model, o.Model}, setting{"cwd", p.Cwd, o.Cwd},
		setting{"session", p.StateDir, o.StateDir}, setting{"env", p.Env, o.Env}, setting{"confinement", p.Confine, o.Confine})
}

// setting is one named setting of two processes, for changedSettings.
type setting struct{ name, a, b string }

// changedSettings names the settings whose two values differ, in order.
func changedSettings(settings ...setting) []string {
	var out []string
	for _, f := range settings {
		if f.a != f.b {
			out = append(out, f.name)
		}
	}
	return out
}

// dead reports whether the process has exited.
func (sp *sessionProc) dead() bool {
	select {
	case <-sp.proc.exited:
		return true
	default:
		return false
	}
}

// takeSessionProc removes the idle process of key from the registry and
// returns it if it is alive and started for fingerprint; otherwise it
// ends it and returns nil. It says which, and why (wire.HarnessStart).
func (e *Engine) takeSessionProc(key string, fingerprint procSettings) (*sessionProc, wire.HarnessStart) {
	e.ret.mu.Lock()
	sp := e.ret.procs[key]
	delete(e.ret.procs, key)
	e.ret.mu.Unlock()
	started := func(reason string, changed ...string) (*sessionProc, wire.HarnessStart) {
		return nil, wire.HarnessStart{Process: wire.HarnessStarted, Reason: reason, Changed: changed}
	}
	if sp == nil {
		return started(wire.StartNoneReady)
	}
	sp.idle.Stop()
	if sp.fingerprint != fingerprint {
		e.endSessionProc(sp)
		return started(wire.StartSettingsChanged, fingerprint.changed(sp.fingerprint)...)
	}
	if sp.dead() {
		e.endSessionProc(sp)
		return started(wire.StartExited)
	}
	// Whatever it printed between turns belongs to no turn.
	for {
		select {
		case _, ok := <-sp.proc.lines:
			if !ok {
				e.endSessionProc(sp)
				return started(wire.StartExited)
			}
			continue
		default:
		}
		return sp, wire.HarnessStart{Process: wire.HarnessKept}
	}
}

// keepSessionProc puts a process whose turn ended cleanly back in the
// registry, to wait SessionIdleTimeout for the session's next turn. A
// closed engine or session ends it instead; a full registry
// (MaxSessionProcs) ends the process idle longest.
func (e *Engine) keepSessionProc(ctx context.Context, sp *sessionProc, sessionID string) {
	if rs, err := e.store.GetSession(ctx, sessionID); err != nil || !rs.ClosedAt.IsZero() {
		e.endSessionProc(sp)
		return
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	e.ret.mu.Lock()
	if closed || e.ret.procs[sp.key] != nil {
		e.ret.mu.Unlock()
		e.endSessionProc(sp)
		return
	}
	if e.ret.procs == nil {
		e.ret.procs = map[string]*sessionProc{}
	}
	e.ret.procs[sp.key] = sp
	sp.idleSince = time.Now()
	evicted := e.evictSessionProcLocked()
	sp.idle = time.AfterFunc(e.opts.SessionIdleTimeout, func() {
		e.ret.mu.Lock()
		mine := e.ret.procs[sp.key] == sp
		if mine {
			delete(e.ret.procs, sp.key)
		}
		e.ret.mu.Unlock()
		if mine {
			e.log.Debug("session process idle; ending it", "pgid", sp.proc.pgid)
			e.endSessionProc(sp)
		}
	})
	e.ret.mu.Unlock()
	if evicted != nil {
		// Not on this turn's time: its run reads terminal only after this.
		// The caller is a run goroutine, so Close waits for this one too.
		e.log.Debug("too many idle session processes; ending the one idle longest", "pgid", evicted.proc.pgid)
		evicted.idle.Stop()
		e.wg.Go(func() { e.endSessionProc(evicted) })
	}
	// Close may have emptied the registry before this process entered it,
	// and the session may have closed since it was read above: CloseSession
	// closes it in the store before it empties the registry, so one of the
	// two sees the other.
	e.mu.Lock()
	closed = e.closed
	e.mu.Unlock()
	if closed {
		e.endSessionProcs()
	}
	if rs, err := e.store.GetSession(ctx, sessionID); err != nil || !rs.ClosedAt.IsZero() {
		e.EndSession(sessionID)
	}
}

// evictSessionProcLocked removes and returns the process idle longest
// when the registry holds more than MaxSessionProcs, else nil. The caller
// holds e.ret.mu and ends what it returns.
func (e *Engine) evictSessionProcLocked() *sessionProc {
	if len(e.ret.procs) <= e.opts.MaxSessionProcs {
		return nil
	}
	var oldest *sessionProc
	for _, sp := range e.ret.procs {
		if oldest == nil || sp.idleSince.Before(oldest.idleSince) {
			oldest = sp
		}
	}
	delete(e.ret.procs, oldest.key)
	return oldest
}

// endSessionProc ends a process that is out of the registry: stdin is
// closed so that the harness can finish its session records, then after
// ResultGrace its group is killed. It returns once the process is gone.
func (e *Engine) endSessionProc(sp *sessionProc) {
	sp.endOnce.Do(func() {
		p := sp.proc
		p.closeStdin()
		select {
		case <-p.exited:
		case <-time.After(e.opts.ResultGrace):
		}
		killGroup(p.pgid, syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(e.opts.KillGrace):
			e.log.Warn("session process did not exit after SIGKILL", "pgid", p.pgid)
		}
	})
}

// EndSession ends the idle long-lived process of a retained session, if
// any. A process still serving a turn is ended when the turn ends, since
// the session is then closed in the store.
func (e *Engine) EndSession(sessionID string) {
	e.ret.mu.Lock()
	var ended []*sessionProc
	for key, sp := range e.ret.procs {
		if strings.HasSuffix(key, "\x00"+sessionID) {
			delete(e.ret.procs, key)
			ended = append(ended, sp)
		}
	}
	e.ret.mu.Unlock()
	for _, sp := range ended {
		sp.idle.Stop()
		e.endSessionProc(sp)
	}
}

// endSessionProcs ends every idle session process.
func (e *Engine) endSessionProcs() {
	e.ret.mu.Lock()
	procs := e.ret.procs
	e.ret.procs = nil
	e.ret.mu.Unlock()
	var wg sync.WaitGroup
	for _, sp := range procs {
		sp.idle.Stop()
		wg.Go(func() { e.endSessionProc(sp) })
	}
	wg.Wait()
}
