package exact

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/internal/leftover"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Errors callers branch on.
var (
	// ErrNotFound is an environment absent or destroyed, or a process it
	// does not have.
	ErrNotFound = errors.New("exact: not found")
	// ErrConflict is an idempotency key bound to a different request.
	ErrConflict = errors.New("exact: idempotency key bound to a different request")
	// ErrTooLarge is a file larger than a read's bound.
	ErrTooLarge = errors.New("exact: file exceeds maxBytes")
	// ErrClosed is a manager that is closing.
	ErrClosed = errors.New("exact: closing")
)

// RequestError is a request that cannot be carried out as asked (a path
// outside the environment's file system, a directory read as a file,
// too many processes); the bridge answers it 400.
type RequestError struct{ Msg string }

func (e *RequestError) Error() string { return e.Msg }

// Options configure a Manager. Zero values mean the defaults.
type Options struct {
	// Store records environments and processes (required).
	Store *store.Store
	// Jailer confines the processes (required).
	Jailer *jail.Jailer
	// Dir holds each environment's files and its processes' output
	// (required).
	Dir string
	// ProcDir is the proc filesystem Start looks for leftover processes
	// in (default /proc).
	ProcDir string
	// Logger receives what the manager does on its own: expiries and
	// recoveries (default: discard).
	Logger *slog.Logger
}

// Manager keeps the exact process environments of one bridge.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	procs  map[procKey]*proc
	timers map[string]*time.Timer // lifetime of each live environment
	closed bool
	wg     sync.WaitGroup // process waiters and expiries
}

type procKey struct {
	env string
	pid int64
}

// New returns a manager; Start recovers what a previous one left.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil || opts.Jailer == nil || opts.Dir == "" {
		return nil, errors.New("exact: Store, Jailer and Dir are required")
	}
	if opts.ProcDir == "" {
		opts.ProcDir = "/proc"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, log: opts.Logger, procs: map[procKey]*proc{}, timers: map[string]*time.Timer{}}, nil
}

// Check probes the jail again: whether processes can be confined here
// now (an *jail.UnavailableError when not).
func (m *Manager) Check(ctx context.Context) error { return m.opts.Jailer.ProbeIsolated(ctx) }

// Start recovers the previous incarnation's state: its running processes
// are recorded ended by SIGKILL (a leftover still carrying its marker is
// killed), each live environment's lifetime is armed again (one past it
// is destroyed), and the directories of environments no longer live are
// removed.
func (m *Manager) Start(ctx context.Context) error {
	st := m.opts.Store
	running, err := st.ExactProcesses(ctx, "")
	if err != nil {
		return fmt.Errorf("recover exact processes: %w", err)
	}
	groups := make([]leftover.Group, len(running))
	for i, p := range running {
		groups[i] = leftover.Group{Marker: marker(p.EnvID, p.PID), PGID: p.PGID}
	}
	leftover.Kill(m.opts.ProcDir, groups)
	for _, p := range running {
		var s wire.ExactProcessStatus
		if err := json.Unmarshal(p.Status, &s); err != nil {
			return fmt.Errorf("recover exact process %s/%d: %w", p.EnvID, p.PID, err)
		}
		ended(&s, termination{kind: wire.TerminationSignal, signal: "SIGKILL"}, st.Now())
		if err := m.record(ctx, p.EnvID, 0, s); err != nil {
			return err
		}
	}
	envs, err := st.LiveExactEnvironments(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, e := range envs {
		live[e.ID] = true
		m.arm(e)
	}
	names, err := os.ReadDir(m.opts.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("recover exact environments: %w", err)
	}
	for _, n := range names {
		if !live[n.Name()] {
			os.RemoveAll(filepath.Join(m.opts.Dir, n.Name()))
		}
	}
	if len(running) > 0 || len(envs) > 0 {
		m.log.Info("exact environments recovered", "environments", len(envs), "processes_ended", len(running))
	}
	return nil
}

// arm destroys e when its lifetime ends.
func (m *Manager) arm(e store.ExactEnvironment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	id := e.ID
	m.timers[id] = time.AfterFunc(time.Until(e.ExpiresAt), func() {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return
		}
		m.wg.Add(1)
		m.mu.Unlock()
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := m.Destroy(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
			m.log.Error("destroy expired exact environment", "environment", id, "err", err)
			return
		}
		m.log.Info("exact environment expired", "environment", id)
	})
}

// Close kills every process the manager started, stops the lifetimes and
// waits for both, or for ctx.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	for _, t := range m.timers {
		t.Stop()
	}
	for _, p := range m.procs {
		p.stop(stopCancelled)
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close exact environments: %w", ctx.Err())
	}
}

// Create makes the environment of req, or returns the one its key is
// bound to (status replayed); a key bound to another request is
// ErrConflict.
func (m *Manager) Create(ctx context.Context, req wire.ExactEnvironmentRequest) (wire.ExactEnvironmentResult, error) {
	if err := req.Validate(); err != nil {
		return wire.ExactEnvironmentResult{}, &RequestError{Msg: err.Error()}
	}
	digest, err := req.Digest()
	if err != nil {
		return wire.ExactEnvironmentResult{}, &RequestError{Msg: err.Error()}
	}
	now := m.opts.Store.Now().UTC()
	view := wire.ExactEnvironment{ID: "xenv_" + strings.ToLower(rand.Text()), IdempotencyKey: req.IdempotencyKey,
		RequestDigest: digest, Image: req.Image, Egress: req.Egress, Resources: req.Resources,
		MaxLifetimeMS: req.MaxLifetimeMS, Metadata: req.Metadata, CreatedAt: now.Format(time.RFC3339Nano),
		ExpiresAt: now.Add(time.Duration(req.MaxLifetimeMS) * time.Millisecond).Format(time.RFC3339Nano)}
	raw, err := json.Marshal(view)
	if err != nil {
		return wire.ExactEnvironmentResult{}, err
	}
	rec := store.ExactEnvironment{ID: view.ID, IdempotencyKey: req.IdempotencyKey, RequestDigest: digest, View: raw,
		CreatedAt: now, ExpiresAt: now.Add(time.Duration(req.MaxLifetimeMS) * time.Millisecond)}
	if err := os.MkdirAll(m.tmpDir(view.ID), 0o700); err != nil {
		return wire.ExactEnvironmentResult{}, fmt.Errorf("create exact environment: %w", err)
	}
	got, err := m.opts.Store.AddExactEnvironment(ctx, rec)
	if errors.Is(err, store.ErrResourceExists) {
		os.RemoveAll(m.envDir(view.ID))
		if got.RequestDigest != digest {
			return wire.ExactEnvironmentResult{}, ErrConflict
		}
		if !got.DestroyedAt.IsZero() {
			return wire.ExactEnvironmentResult{}, fmt.Errorf("%w: environment %s of this key was destroyed", ErrConflict, got.ID)
		}
		var v wire.ExactEnvironment
		if err := json.Unmarshal(got.View, &v); err != nil {
			return wire.ExactEnvironmentResult{}, err
		}
		return wire.ExactEnvironmentResult{Status: wire.ExactReplayed, Environment: v}, nil
	}
	if err != nil {
		os.RemoveAll(m.envDir(view.ID))
		return wire.ExactEnvironmentResult{}, err
	}
	m.arm(rec)
	return wire.ExactEnvironmentResult{Status: wire.ExactCreated, Environment: view}, nil
}

// live returns a live environment's record and view.
func (m *Manager) live(ctx context.Context, id string) (store.ExactEnvironment, wire.ExactEnvironment, error) {
	var v wire.ExactEnvironment
	e, err := m.opts.Store.GetExactEnvironment(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (!e.DestroyedAt.IsZero() || !m.opts.Store.Now().Before(e.ExpiresAt)) {
		return e, v, ErrNotFound
	}
	if err != nil {
		return e, v, err
	}
	return e, v, json.Unmarshal(e.View, &v)
}

// Get returns a live environment's view.
func (m *Manager) Get(ctx context.Context, id string) (wire.ExactEnvironment, error) {
	_, v, err := m.live(ctx, id)
	return v, err
}

// List returns the live environments whose metadata holds every entry of
// match (equal as canonical JSON), oldest first.
func (m *Manager) List(ctx context.Context, match map[string]json.RawMessage) ([]wire.ExactEnvironment, error) {
	envs, err := m.opts.Store.LiveExactEnvironments(ctx)
	if err != nil {
		return nil, err
	}
	want, err := canonicalEntries(match)
	if err != nil {
		return nil, &RequestError{Msg: "metadata: " + err.Error()}
	}
	out := []wire.ExactEnvironment{}
	now := m.opts.Store.Now()
	for _, e := range envs {
		if !now.Before(e.ExpiresAt) {
			continue
		}
		var v wire.ExactEnvironment
		if err := json.Unmarshal(e.View, &v); err != nil {
			return nil, err
		}
		have, err := canonicalEntries(v.Metadata)
		if err != nil {
			return nil, err
		}
		ok := true
		for k, w := range want {
			if h, found := have[k]; !found || !bytes.Equal(h, w) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

func canonicalEntries(m map[string]json.RawMessage) (map[string][]byte, error) {
	out := make(map[string][]byte, len(m))
	for k, raw := range m {
		c, err := wire.Canonical(raw)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

// Destroy ends an environment: it is recorded destroyed, its processes
// are killed and its directory removed. It returns false for an
// environment destroyed before, ErrNotFound for one never created.
func (m *Manager) Destroy(ctx context.Context, id string) (bool, error) {
	if _, err := m.opts.Store.GetExactEnvironment(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, ErrNotFound
		}
		return false, err
	}
	destroyed, err := m.opts.Store.DestroyExactEnvironment(ctx, id)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	if t := m.timers[id]; t != nil {
		t.Stop()
		delete(m.timers, id)
	}
	var stopping []*proc
	for k, p := range m.procs {
		if k.env == id {
			p.stop(stopCancelled)
			stopping = append(stopping, p)
		}
	}
	m.mu.Unlock()
	for _, p := range stopping {
		select {
		case <-p.done:
		case <-ctx.Done():
			return destroyed, fmt.Errorf("destroy exact environment %s: %w", id, ctx.Err())
		}
	}
	if err := os.RemoveAll(m.envDir(id)); err != nil {
		return destroyed, fmt.Errorf("destroy exact environment %s: %w", id, err)
	}
	return destroyed, nil
}

func (m *Manager) envDir(id string) string { return filepath.Join(m.opts.Dir, id) }
func (m *Manager) tmpDir(id string) string { return filepath.Join(m.opts.Dir, id, "tmp") }
func (m *Manager) outPath(id string, pid int64, stream string) string {
	return filepath.Join(m.opts.Dir, id, "proc", fmt.Sprintf("%d.%s", pid, stream))
}
