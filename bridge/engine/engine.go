package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/bridge/exact"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Errors Start returns for conditions the caller answers with a status.
var (
	// ErrIdentityConflict: the run id is bound to a different request.
	ErrIdentityConflict = errors.New("run id is bound to a different request")
	// ErrSaturated: the maximum of concurrent runs is reached.
	ErrSaturated = errors.New("too many concurrent runs")
	// ErrSessionBusy: the session already has a live run.
	ErrSessionBusy = errors.New("session has a live run")
	// ErrClosed: the engine is shutting down.
	ErrClosed = errors.New("engine is closed")
)

// Backend is one registered harness.
type Backend struct {
	Adapter harness.Adapter
	// Bin is the binary to run.
	Bin string
	// Timeout bounds one turn (<KEY>_TIMEOUT_MS); 0 means only the run
	// lifetime bounds it.
	Timeout time.Duration
}

// Defaults of Options.
const (
	DefaultMaxRuns     = 4
	DefaultMaxLifetime = 6 * time.Hour
	DefaultIdleTimeout = 10 * time.Minute
	DefaultResultGrace = 2 * time.Second
	DefaultKillGrace   = 2 * time.Second
	// DefaultSessionIdleTimeout is how long a retained session's harness
	// process waits for the next turn. An idle Claude Code process holds
	// about 200 MB, and clients (ours and the TypeScript one) close no
	// session when they destroy an environment, so it is short: what it
	// saves is the start of a resuming process, about half a second per
	// turn (TestLive_ClaudeSessionLatency).
	DefaultSessionIdleTimeout = 5 * time.Minute
)

// Options configure an Engine. Zero values mean the defaults.
type Options struct {
	// DataDir holds per-session harness state (required).
	DataDir string
	// RouterURL and RouterKey are handed to every harness.
	RouterURL, RouterKey string
	// MaxRuns is the most concurrent live runs (default 4).
	MaxRuns int
	// MaxLifetime bounds every run (default 6 h).
	MaxLifetime time.Duration
	// IdleTimeout ends a run whose harness printed nothing for that long
	// (default 10 min).
	IdleTimeout time.Duration
	// ResultGrace is how long a harness may take to exit after its
	// terminal line before it is killed (default 2 s).
	ResultGrace time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL (default 2 s).
	KillGrace time.Duration
	// SessionIdleTimeout is how long the long-lived process of a retained
	// session (harness.Persistent) waits for the session's next turn
	// before it is ended; the turn after that starts a fresh process that
	// resumes the session (default 5 min). Negative runs every retained
	// turn in a fresh process.
	SessionIdleTimeout time.Duration
	// MaxSessionProcs is the most such processes kept idle at once: when
	// one more turn ends, the process idle longest is ended, and its
	// session resumes in a fresh process (default MaxRuns).
	MaxSessionProcs int
	// Spares starts harness processes ahead of the turns likely next,
	// for the adapters that can take a turn that way (spare.go).
	Spares bool
	// PrestartDelay is how long after its start the engine waits before
	// a Prestart template's spare (a box's start, or the claim of a pooled
	// one, is busy enough without it), and skips it when a turn came
	// meanwhile. Default 250 ms; negative none.
	PrestartDelay time.Duration
	// Quiet, when set, waits until the machine can take a spare's start
	// without slowing what is due (pressure.Gate.Wait); a spare is
	// started only after it returns nil, and only if no turn was admitted
	// meanwhile. Nil starts spares without waiting.
	Quiet func(context.Context) error
	// Secrets are redacted from every harness stderr the engine reports.
	// The router key is always among them.
	Secrets []string
	// Environ is the environment harnesses start from (default
	// os.Environ() without BRIDGE_* and TANGLE_* variables).
	Environ []string
	// Bwrap is the bubblewrap binary jailed turns run under (default: bwrap
	// on PATH); Relay the executable that serves a net jail's relay
	// (default: this process's, whose main calls jail.ServeRelayIfAsked).
	Bwrap, Relay string
	// JailFloor is the operator's confinement floor every turn is raised
	// to (jail.Floor; default none).
	JailFloor jail.Floor
	// Probed, when set, is a jailer that probed this host already (a
	// standby bridge's): the engine takes its verdict (jail.Jailer.Adopt)
	// and does not probe at its start.
	Probed *jail.Jailer
	// Hold, when set, is waited on before a reader of a live run gets
	// events up to seq through: the bridge's replica shipping
	// (replicate.Queue.Hold), which bounds the wait.
	Hold func(ctx context.Context, run string, through int64)
	// ProcDir is the proc filesystem used to find leftover processes
	// (default /proc).
	ProcDir string
	// Logger receives operational logs (default: discard).
	Logger *slog.Logger
	// Background makes New return before the slow part of the start, the
	// recovery of the runs a previous incarnation left live and the jail
	// probe, which then run in the background: Start, Close and the
	// caller's WaitReady wait for the recovery, ExecutionCaps for the
	// probe.
	Background bool
}

func (o Options) withDefaults() Options {
	if o.MaxRuns <= 0 {
		o.MaxRuns = DefaultMaxRuns
	}
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = DefaultMaxLifetime
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.ResultGrace <= 0 {
		o.ResultGrace = DefaultResultGrace
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	switch {
	case o.PrestartDelay == 0:
		o.PrestartDelay = 250 * time.Millisecond
	case o.PrestartDelay < 0:
		o.PrestartDelay = 0
	}
	if o.SessionIdleTimeout == 0 {
		o.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if o.MaxSessionProcs <= 0 {
		o.MaxSessionProcs = o.MaxRuns
	}
	if o.Environ == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "BRIDGE_") && !strings.HasPrefix(kv, "TANGLE_") && !strings.HasPrefix(kv, MarkerVar+"=") {
				o.Environ = append(o.Environ, kv)
			}
		}
	}
	if o.ProcDir == "" {
		o.ProcDir = "/proc"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RouterKey != "" {
		o.Secrets = append(o.Secrets, o.RouterKey)
	}
	return o
}

// Engine owns the live runs. It is safe for concurrent use.
type Engine struct {
	opts  Options
	store *store.Store
	log   *slog.Logger

	mu     sync.Mutex
	live   map[string]*liveRun
	closed bool
	// ret is the state of retained session turns (session.go).
	ret retainedState
	// jail confines the turns whose execution asks for it (confine.go).
	jail *jail.Jailer
	// exact keeps the exact process environments, confined by jail.
	exact *exact.Manager
	// spares are the harness processes started ahead of their turns
	// (spare.go), oldest first.
	spares []*spare
	// admitted counts the one-shot runs this engine admitted.
	admitted int
	// template is the last Prestart's.
	template SpareTemplate
	// rebound are the settings of the spares the last Bind ended for
	// another environment, until a spare of those settings started or a
	// turn of them reported it (wire.StartEnvironmentChanged).
	rebound []spareSettings
	// stats are the counters Stats reports (stats.go).
	stats counters
	wg    sync.WaitGroup
	// ready is closed once the recovery is done, with startErr its
	// outcome; probed once the jail's first probe is.
	ready, probed chan struct{}
	startErr      error
	// life ends with Close: the waits of spares not started yet.
	life    context.Context
	endLife context.CancelFunc
	// bound are the harnesses' environment and the secrets redacted
	// from what the engine reports: Options' until a Bind.
	bound atomic.Pointer[binding]
}

// binding is what Bind sets.
type binding struct {
	environ, secrets []string
}

// environ is the environment harnesses start from.
func (e *Engine) environ() []string { return e.bound.Load().environ }

// Environ returns the environment harnesses start from (Options.Environ,
// or the last Bind's): what a command run for a caller starts from too.
func (e *Engine) Environ() []string { return slices.Clone(e.environ()) }

// secrets are redacted from every harness output the engine reports.
func (e *Engine) secrets() []string { return e.bound.Load().secrets }

// Bind gives an engine started before its box was claimed (a pooled
// box's bridge) the claim's settings: the harnesses' environment from
// now on, and more secrets to redact. Spares started with another
// environment are ended (a turn must see the claim's), and the Prestart
// template's spare is started again.
func (e *Engine) Bind(environ []string, secrets ...string) {
	old := e.bound.Load()
	secrets = append(slices.Clone(old.secrets), slices.DeleteFunc(slices.Clone(secrets), func(s string) bool { return s == "" })...)
	e.bound.Store(&binding{environ: environ, secrets: secrets})
	if slices.Equal(old.environ, environ) {
		return
	}
	e.mu.Lock()
	ended := e.spares
	e.spares, e.rebound = nil, nil
	for _, s := range ended {
		e.rebound = append(e.rebound, s.key)
	}
	t := e.template
	e.mu.Unlock()
	for _, s := range ended {
		e.endSpare(s)
	}
	e.prestartTemplate(t, 0)
}

// liveRun is the shared state of a run whose goroutine is running.
type liveRun struct {
	id, sessionID, harness string
	bc                     *broadcast
	done                   chan struct{} // closed once the run is terminal in the store
	cancel                 chan struct{} // closed by the first cancel request
	cancelOnce             sync.Once
	cancelReason           atomic.Value // string: wire error type of the stop
	readers                atomic.Int32
	// tctx carries span, the run's "bridge.run" span (a child of its
	// admission's), which ends with the run.
	tctx context.Context
	span trace.Span
	// first is the wait for the harness's first output line.
	first trace.Span
	// last is the sequence number of the run's last committed event, as
	// far as committed was told: readers that read up to it wait for the
	// next wake without asking the store.
	last atomic.Int64
	// recent are the newest committed frames, for readers that keep up.
	recent recentFrames
}

// committed records that the run's events up to last are committed and
// wakes its readers.
func (l *liveRun) committed(last int64) {
	l.recent.reset()
	l.advance(last)
}

// committedFrames is committed for frames, the events up to last, which
// the run's readers may take from memory (recentFrames).
func (l *liveRun) committedFrames(last int64, frames [][]byte) {
	l.recent.add(last, frames)
	l.advance(last)
}

// recentLimits are the bounds of a live run's recentFrames: the store's
// retention, and recentBytes.
func (e *Engine) recentLimits() (events, bytes int) {
	o := e.store.Options()
	return int(min(o.MaxEvents, 1<<30)), int(min(o.MaxBytes, recentBytes))
}

func (l *liveRun) advance(last int64) {
	if last > l.last.Load() {
		l.last.Store(last)
	}
	l.bc.notify()
}

func (l *liveRun) stop(reason string) bool {
	first := false
	l.cancelOnce.Do(func() {
		l.cancelReason.Store(reason)
		close(l.cancel)
		first = true
	})
	return first
}

// New returns an engine over st, after ending the runs a previous
// incarnation left live (see the package doc).
func New(ctx context.Context, st *store.Store, opts Options) (*Engine, error) {
	if opts.DataDir == "" {
		return nil, errors.New("engine: DataDir is required")
	}
	e := &Engine{opts: opts.withDefaults(), store: st, live: map[string]*liveRun{},
		ready: make(chan struct{}), probed: make(chan struct{})}
	e.life, e.endLife = context.WithCancel(context.Background())
	e.bound.Store(&binding{environ: e.opts.Environ, secrets: e.opts.Secrets})
	e.log = e.opts.Logger
	e.jail = jail.New(jail.Options{Bwrap: e.opts.Bwrap, DataDir: e.opts.DataDir, RouterURL: e.opts.RouterURL,
		Relay: e.opts.Relay, Floor: e.opts.JailFloor, Logger: e.log})
	var err error
	if e.exact, err = exact.New(exact.Options{Store: st, Jailer: e.jail, Dir: filepath.Join(e.opts.DataDir, "exact"),
		ProcDir: e.opts.ProcDir, Logger: e.log}); err != nil {
		return nil, err
	}
	if e.opts.Background {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			ctx := context.WithoutCancel(ctx)
			e.startErr = e.start(ctx)
			close(e.ready)
			// What the last incarnation left in the store's log is
			// folded into the database, so that the next start reads
			// little of it.
			if err := e.store.Checkpoint(ctx); err != nil {
				e.log.Warn("checkpoint after the start", "err", err)
			}
		}()
		return e, nil
	}
	e.startErr = e.start(ctx)
	close(e.ready)
	if e.startErr != nil {
		return nil, e.startErr
	}
	return e, nil
}

// start recovers the runs a previous incarnation left live while it
// probes the jail; unless in the background it waits for the probe too.
// A jail that cannot run here is reported, not fatal: turns that ask for
// one are refused (Check probes again on each).
func (e *Engine) start(ctx context.Context) error {
	if e.jail.Adopt(e.opts.Probed) {
		close(e.probed)
	} else {
		go func() {
			defer close(e.probed)
			e.jail.Probe(ctx)
		}()
	}
	err := errors.Join(e.recover(ctx), e.exact.Start(ctx))
	if !e.opts.Background {
		<-e.probed
	}
	return err
}

// WaitReady waits until the engine's recovery is done (at once unless
// Options.Background) and returns its error, or ctx's.
func (e *Engine) WaitReady(ctx context.Context) error {
	select {
	case <-e.ready:
		return e.startErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready is closed once the engine's recovery is done; WaitReady then
// returns its outcome.
func (e *Engine) Ready() <-chan struct{} { return e.ready }

// StartRequest is one validated turn.
type StartRequest struct {
	RunID, Digest string
	Backend       *Backend
	// Model is the bare model for the harness; ModelID the full id
	// reported in chunks.
	Model, ModelID                                  string
	Provider, EnvironmentID, SessionID, ExecutionID string
	Messages                                        []wire.Message
	Cwd                                             string
	Env                                             map[string]string
	Effort                                          string
	// Confine is the confinement the turn's execution asks for, and
	// Timeout its execution.timeoutMs (0: the backend's).
	Confine jail.Request
	Timeout time.Duration
}

// Start starts a run, or attaches to the run already bound to the same id
// and digest (created false). It returns the stored run.
func (e *Engine) Start(ctx context.Context, req StartRequest) (_ store.Run, created bool, err error) {
	// A run admitted during the recovery would be taken for one the
	// previous incarnation left.
	if err := e.WaitReady(ctx); err != nil {
		return store.Run{}, false, err
	}
	ctx, span := admissionSpan(ctx, req.RunID, req.Backend)
	defer func() { endAdmission(span, err) }()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return store.Run{}, false, ErrClosed
	}
	existing, err := e.store.GetRun(ctx, req.RunID)
	switch {
	case err == nil:
		if existing.Digest != req.Digest {
			return existing, false, ErrIdentityConflict
		}
		return existing, false, nil
	case !errors.Is(err, store.ErrNotFound):
		return store.Run{}, false, err
	}
	if len(e.live) >= e.opts.MaxRuns {
		return store.Run{}, false, ErrSaturated
	}
	harnessName := req.Backend.Adapter.Name()
	if req.SessionID != "" {
		for _, l := range e.live {
			if l.sessionID == req.SessionID && l.harness == harnessName {
				return store.Run{}, false, ErrSessionBusy
			}
		}
	}
	now := e.store.Now()
	run, created, err := e.store.CreateRun(ctx, store.Run{
		ID: req.RunID, Digest: req.Digest, Harness: harnessName, Model: req.ModelID,
		Provider: req.Provider, EnvironmentID: req.EnvironmentID, SessionID: req.SessionID,
		ExecutionID: req.ExecutionID, StartedAt: now, LifetimeExpiresAt: now.Add(e.opts.MaxLifetime),
		Marker: MarkerVar + "=" + req.RunID,
	})
	if err != nil {
		return store.Run{}, false, err
	}
	if !created { // lost a race with a run created outside this engine
		if run.Digest != req.Digest {
			return run, false, ErrIdentityConflict
		}
		return run, false, nil
	}
	l := &liveRun{id: req.RunID, sessionID: req.SessionID, harness: harnessName, bc: newBroadcast(),
		done: make(chan struct{}), cancel: make(chan struct{})}
	l.recent.maxEvents, l.recent.maxBytes = e.recentLimits()
	l.startTrace(ctx)
	e.live[req.RunID] = l
	e.admitted++
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.execute(l, req, run.StartedAt)
	}()
	return run, true, nil
}

// Live reports a live run's attached readers and whether a stop was
// requested; ok is false for a run that is not live.
func (e *Engine) Live(id string) (readers int, cancelling bool, ok bool) {
	e.mu.Lock()
	l := e.live[id]
	e.mu.Unlock()
	if l == nil {
		return 0, false, false
	}
	select {
	case <-l.cancel:
		cancelling = true
	default:
	}
	return int(l.readers.Load()), cancelling, true
}

// Cancel asks a live run to stop and reports whether this was the first
// request. A run that is not live is left alone (requested false).
func (e *Engine) Cancel(ctx context.Context, id string) (requested bool, err error) {
	e.mu.Lock()
	l := e.live[id]
	e.mu.Unlock()
	if l == nil {
		return false, nil
	}
	if err := e.store.RequestCancel(ctx, id); err != nil {
		return false, err
	}
	return l.stop(wire.TypeRunCancelled), nil
}

// Wait blocks until run id is terminal (true), ctx ends (false), or at
// once if it is not live.
func (e *Engine) Wait(ctx context.Context, id string) bool {
	e.mu.Lock()
	l := e.live[id]
	e.mu.Unlock()
	if l == nil {
		return true
	}
	select {
	case <-l.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// Store returns the engine's store.
func (e *Engine) Store() *store.Store { return e.store }

// LiveCount is the number of live runs.
func (e *Engine) LiveCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.live)
}

// Close refuses new runs, stops every live run (finished as error
// bridge_shutdown) and waits for them, or for ctx, then ends the
// long-lived processes of retained sessions.
func (e *Engine) Close(ctx context.Context) error {
	select { // the start uses the store
	case <-e.ready:
	case <-ctx.Done():
		return fmt.Errorf("close engine: %w", ctx.Err())
	}
	e.mu.Lock()
	e.closed = true
	e.endLife()
	for _, l := range e.live {
		l.stop(wire.TypeBridgeShutdown)
	}
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
		e.endSessionProcs()
		e.endSpares()
		return e.exact.Close(ctx)
	case <-ctx.Done():
		e.endSessionProcs()
		e.endSpares()
		return errors.Join(fmt.Errorf("close engine: %w", ctx.Err()), e.exact.Close(ctx))
	}
}

// Exact returns the engine's exact process environments.
func (e *Engine) Exact() *exact.Manager { return e.exact }

// sessionDirPath is where the private state of a harness session lives.
func (e *Engine) sessionDirPath(harnessName, sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	return filepath.Join(e.opts.DataDir, "sessions", harnessName, hex.EncodeToString(sum[:16]))
}

// sessionDir is the private state directory of a harness session,
// created if needed.
func (e *Engine) sessionDir(harnessName, sessionID string) (string, error) {
	dir := e.sessionDirPath(harnessName, sessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("session state dir: %w", err)
	}
	return dir, nil
}
