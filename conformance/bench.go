package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
)

// The bench workloads. Burst is the public sandbox benchmark's: N boxes
// asked for at once, each timed from the request to the answer of
// `node -v` run in it (time to interactive): through the box's bridge
// (POST /v1/exec) for boxctl's boxes, as a program driving them would,
// and through the vendor's exec for the bare baseline. FirstEvent times a turn
// request on a ready box to the agent's first event, for the first turn
// of a box and for the second turn of its session; Turn times a whole
// turn.
const (
	WorkloadBurst      = "burst"
	WorkloadFirstEvent = "first-event"
	WorkloadTurn       = "turn"
)

// Workloads are the bench's workloads in the order it runs them.
var Workloads = []string{WorkloadBurst, WorkloadFirstEvent, WorkloadTurn}

// The bench modes: how the box of a measurement was made.
const (
	// ModeBare is the vendor's own create of the same image, nothing of
	// boxctl's in it: `docker run` on Docker (the Engine API's create and
	// start), the vendor's create route elsewhere.
	ModeBare = "bare"
	// ModeCold is boxctl's create: the vendor's create, the bridge
	// started and ready, its harness checked, the environment made.
	ModeCold = "cold"
	// ModePool is a claim of a standby box made before the measurement.
	ModePool = "pool"
	// ModeSession is the second turn of a session on the box of its
	// first.
	ModeSession = "session"
	// ModeNoSpare is a cold box whose bridge starts no harness ahead of
	// a turn (BRIDGE_SPARES=0): the harness starts with the turn, as
	// before spares. It is the turn workloads' baseline.
	ModeNoSpare = "no-spare"
)

// Modes are the bench's modes.
var Modes = []string{ModeBare, ModeCold, ModePool, ModeSession, ModeNoSpare}

// BenchOptions choose what Bench measures.
type BenchOptions struct {
	// Harness is the harness the boxes serve; default claude-code.
	Harness string
	// Burst is how many boxes each burst asks for at once; default 10.
	Burst int
	// Turns is how many turns each turn workload times, one after the
	// other; default 10.
	Turns int
	// Pause is how long a turn workload waits between getting its box
	// (or the answer to the session's first turn) and the timed turn, as
	// a caller does; default 1 s, negative none.
	Pause time.Duration
	// Settle bounds the wait, after a pool's boxes are booted and before
	// their claims, for this machine to be quiet, as a pool in use has
	// started its harnesses ahead; default 3 minutes, negative none.
	Settle time.Duration
	// Workloads are the workloads to run (default all, see Workloads).
	Workloads []string
	// Modes are the modes to run (default all that apply).
	Modes []string
	// Lifetime of each box; default 10 minutes.
	Lifetime time.Duration
	// ReadyTimeout bounds each box's bridge start; default 2 minutes.
	ReadyTimeout time.Duration
	// Logger receives progress; default discards.
	Logger *slog.Logger
}

// BenchReport is what one Bench run measured.
type BenchReport struct {
	// Schema names the JSON Schema of this document.
	Schema string `json:"$schema,omitempty"`
	// Vendor is the target's vendor name; Image the box image.
	Vendor string `json:"vendor" jsonschema:"minLength=1"`
	Image  string `json:"image" jsonschema:"minLength=1"`
	// Harness is the harness the boxes served.
	Harness string `json:"harness" jsonschema:"minLength=1"`
	// Model is "local" for the local model endpoint, else "router".
	Model string `json:"model" jsonschema:"enum=local,enum=router"`
	// Boxctl is the version of the boxctl that ran the bench.
	Boxctl string `json:"boxctl"`
	// Host describes the machine the bench ran on.
	Host BenchHost `json:"host"`
	// StartedAt is when the run started; Seconds how long it took.
	StartedAt time.Time `json:"startedAt"`
	Seconds   float64   `json:"seconds" jsonschema:"minimum=0"`
	// PauseMs is the pause before each timed turn (BenchOptions.Pause).
	PauseMs float64 `json:"pauseMs" jsonschema:"minimum=0"`
	// Rows are the measurements, a workload and mode each.
	Rows []BenchRow `json:"rows"`
	// PooledBoxMiB is the resident memory of a pooled box's processes
	// (bridge, box-init, and the harness it started ahead, where it did)
	// while it waits for its claim, the median of a few of a pool burst's;
	// 0 when no pool burst ran.
	PooledBoxMiB float64 `json:"pooledBoxMiB,omitempty" jsonschema:"minimum=0"`
	// ClaimedBoxMiB is the same of a claimed box at its first turn, its
	// harness started ahead (the pool turn workload's boxes, after the
	// pause), the median; 0 when that did not run.
	ClaimedBoxMiB float64 `json:"claimedBoxMiB,omitempty" jsonschema:"minimum=0"`
}

// BenchHost describes the machine a bench ran on.
type BenchHost struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	CPUs int    `json:"cpus" jsonschema:"minimum=1"`
	// MemoryMiB is the machine's memory (Linux's MemTotal), 0 where it
	// is not known.
	MemoryMiB float64 `json:"memoryMiB,omitempty" jsonschema:"minimum=0"`
}

// BenchRow is one workload in one mode: its samples' success and spread.
type BenchRow struct {
	Workload string `json:"workload" jsonschema:"enum=burst,enum=first-event,enum=turn"`
	Mode     string `json:"mode" jsonschema:"enum=bare,enum=cold,enum=pool,enum=session,enum=no-spare"`
	// Concurrency is how many samples were taken at once.
	Concurrency int `json:"concurrency" jsonschema:"minimum=1"`
	// N is the samples asked for; OK those that succeeded.
	N  int `json:"n" jsonschema:"minimum=0"`
	OK int `json:"ok" jsonschema:"minimum=0"`
	// SuccessRate is OK over N.
	SuccessRate float64 `json:"successRate" jsonschema:"minimum=0,maximum=1"`
	// P50Ms, P95Ms and P99Ms are the successful samples' quantiles in
	// milliseconds (nearest rank); MinMs and MaxMs their range.
	P50Ms float64 `json:"p50Ms" jsonschema:"minimum=0"`
	P95Ms float64 `json:"p95Ms" jsonschema:"minimum=0"`
	P99Ms float64 `json:"p99Ms" jsonschema:"minimum=0"`
	MinMs float64 `json:"minMs" jsonschema:"minimum=0"`
	MaxMs float64 `json:"maxMs" jsonschema:"minimum=0"`
	// Baseline is the mode of the same workload this row is compared to
	// (bare for a burst, no-spare for a turn), with the ratios of the
	// quantiles.
	Baseline string  `json:"baseline,omitempty"`
	RatioP50 float64 `json:"ratioP50,omitempty" jsonschema:"minimum=0"`
	RatioP99 float64 `json:"ratioP99,omitempty" jsonschema:"minimum=0"`
	// PhasesP50Ms are the medians of the phases of boxctl's create or
	// claim (sandbox.Phase names: vendor.create, spawn, health, ...) of
	// the successful samples, where the mode makes a box.
	PhasesP50Ms map[string]float64 `json:"phasesP50Ms,omitempty"`
	// Errors are the distinct errors of the failed samples (at most 5).
	Errors []string `json:"errors,omitempty"`
}

// benchPrompt is the turns' prompt: the local endpoint answers it at once.
const benchPrompt = "Reply with one short sentence."

// Bench runs the selected workloads against t and returns what they
// measured. A sample that fails counts against its row's success rate;
// the error is for a target or options Bench cannot use, or ctx ending.
// Every box it makes is destroyed before it returns.
func Bench(ctx context.Context, t Target, o BenchOptions) (*BenchReport, error) {
	o, err := o.normalized()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	r, err := resolve(t, Options{Harnesses: []string{o.Harness}, Lifetime: o.Lifetime, ReadyTimeout: o.ReadyTimeout, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	stop := r.startBroker(ctx)
	defer stop()
	b := &bencher{r: r, o: o, log: o.Logger.With("bench", r.t.Vendor.Name())}
	p, err := sandbox.New(b.options())
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	b.p = p
	rep := &BenchReport{Vendor: r.t.Vendor.Name(), Image: r.t.Image, Harness: o.Harness, Model: "router",
		Boxctl: buildinfo.Get().String(), StartedAt: time.Now().UTC(),
		Host: BenchHost{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), MemoryMiB: hostMemoryMiB()}, PauseMs: ms(o.Pause)}
	if r.t.Local != nil {
		rep.Model = "local"
	}
	for _, w := range o.Workloads {
		rows, err := b.run(ctx, w, rep)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			return rep, fmt.Errorf("bench %s: %w", w, err)
		}
	}
	rep.Seconds = time.Since(rep.StartedAt).Seconds()
	return rep, ctx.Err()
}

func (o BenchOptions) normalized() (BenchOptions, error) {
	if o.Harness == "" {
		o.Harness = "claude-code"
	}
	if o.Burst == 0 {
		o.Burst = 10
	}
	if o.Turns == 0 {
		o.Turns = 10
	}
	if o.Lifetime == 0 {
		o.Lifetime = 10 * time.Minute
	}
	switch {
	case o.Pause == 0:
		o.Pause = time.Second
	case o.Pause < 0:
		o.Pause = 0
	}
	switch {
	case o.Settle == 0:
		o.Settle = 3 * time.Minute
	case o.Settle < 0:
		o.Settle = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Burst < 0 || o.Turns < 0 || o.Lifetime < 0 || o.ReadyTimeout < 0 {
		return o, errors.New("counts and durations must not be negative")
	}
	if len(o.Workloads) == 0 {
		o.Workloads = Workloads
	}
	for _, w := range o.Workloads {
		if !slices.Contains(Workloads, w) {
			return o, fmt.Errorf("unknown workload %q (want %s)", w, strings.Join(Workloads, ", "))
		}
	}
	for _, m := range o.Modes {
		if !slices.Contains(Modes, m) {
			return o, fmt.Errorf("unknown mode %q (want %s)", m, strings.Join(Modes, ", "))
		}
	}
	return o, nil
}

// startBroker serves a broker in this process in front of the target's
// Router where the target has none and the vendor's boxes reach this
// machine; it returns its stop.
func (r *resolved) startBroker(ctx context.Context) (stop func()) {
	stop, err := ServeBroker(ctx, &r.t, r.o.Logger)
	if err != nil {
		r.o.Logger.Warn("conformance: no broker where the boxes reach this machine: they hold the Router's key", "err", err)
		return func() {}
	}
	return stop
}

// ServeBroker serves t's credential broker in this process, where t's
// boxes reach this machine, in front of t.Router (t.Local's when t.Router
// is unset), unless t names a broker; stop ends it. Run does it itself: a
// caller does it first when something else needs the broker's address
// (an egress gate, which always lets boxes reach it).
func ServeBroker(ctx context.Context, t *Target, log *slog.Logger) (stop func(), err error) {
	if t.Broker != nil {
		return func() {}, nil
	}
	router := t.Router
	if router == (sandbox.Router{}) && t.Local != nil {
		router = t.Local.Router
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The replica of the boxes' events outside them, for the case of a
	// box lost (chaos.box_lost): the run's own, gone with it.
	dir, err := os.MkdirTemp("", "boxctl-conformance-replica-")
	if err != nil {
		return nil, err
	}
	rep, err := replica.Open(ctx, dir, replica.Options{})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	lb, err := sandbox.StartBroker(ctx, t.Vendor, broker.Options{Logger: log, Replica: rep, Upstreams: []broker.Upstream{
		{Name: broker.Router, URL: router.URL, Key: router.Key, Auth: broker.AuthAsPresented}}})
	if err != nil {
		_ = rep.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	t.Broker, t.BrokerURL = lb.Broker, lb.URL
	return func() { _ = lb.Close(); _ = rep.Close(); _ = os.RemoveAll(dir) }, nil
}

// bencher runs the workloads of one Bench.
type bencher struct {
	r   *resolved
	o   BenchOptions
	p   *sandbox.Provider
	log *slog.Logger

	mu    sync.Mutex
	phase map[string][]time.Duration // the row's create phases so far
	// measure has each timed turn measure its box's memory first, into
	// mibs.
	measure bool
	mibs    []float64
}

func (b *bencher) options() sandbox.Options {
	t := b.r.t
	return sandbox.Options{Vendor: t.Vendor, Image: t.Image, Router: t.Router, Broker: t.Broker, BrokerURL: t.BrokerURL,
		Pins: t.Pins, Lifetime: b.o.Lifetime, RunTag: sandbox.NewRunTag(), ReadyTimeout: b.r.o.ReadyTimeout, Logger: b.log}
}

func (b *bencher) wants(mode string) bool {
	return len(b.o.Modes) == 0 || slices.Contains(b.o.Modes, mode)
}

func (b *bencher) request() sandbox.CreateRequest {
	return sandbox.CreateRequest{Profile: provider.Profile{Harness: b.o.Harness}}
}

// run runs workload w in each of its modes.
func (b *bencher) run(ctx context.Context, w string, rep *BenchReport) ([]BenchRow, error) {
	var rows []BenchRow
	b.takePhases()
	add := func(mode string, conc int, s *samples) {
		row := s.row(w, mode, conc)
		row.PhasesP50Ms = b.takePhases()
		rows = append(rows, row)
		last := rows[len(rows)-1]
		b.log.Info("bench", "workload", w, "mode", mode, "ok", last.OK, "n", last.N, "p50_ms", last.P50Ms, "p99_ms", last.P99Ms)
	}
	switch w {
	case WorkloadBurst:
		if b.wants(ModeBare) {
			add(ModeBare, b.o.Burst, b.burst(ctx, b.o.Burst, b.bare))
		}
		if b.wants(ModeCold) {
			add(ModeCold, b.o.Burst, b.burst(ctx, b.o.Burst, b.coldInteractive))
		}
		if b.wants(ModePool) {
			s, mib, err := b.poolBurst(ctx, b.o.Burst)
			if err != nil {
				return rows, err
			}
			rep.PooledBoxMiB = mib
			add(ModePool, b.o.Burst, s)
		}
	case WorkloadFirstEvent, WorkloadTurn:
		whole := w == WorkloadTurn
		if b.wants(ModeNoSpare) {
			o := b.options()
			o.BridgeEnv = map[string]string{"BRIDGE_SPARES": "0"}
			p, err := sandbox.New(o)
			if err != nil {
				return rows, err
			}
			add(ModeNoSpare, 1, b.turns(ctx, b.o.Turns, false, whole, func(ctx context.Context) (*sandbox.Environment, error) {
				return p.Create(ctx, b.request())
			}))
		}
		if b.wants(ModeCold) {
			add(ModeCold, 1, b.turns(ctx, b.o.Turns, false, whole, func(ctx context.Context) (*sandbox.Environment, error) {
				return b.p.Create(ctx, b.request())
			}))
		}
		if b.wants(ModePool) {
			pool, err := b.standbys(ctx, b.o.Turns)
			if err != nil {
				return rows, err
			}
			b.settle(ctx)
			var mu sync.Mutex
			defer func() { // the ones a cancelled run left unclaimed
				for _, rec := range pool {
					_ = b.p.DestroyStandby(context.WithoutCancel(ctx), rec)
				}
			}()
			b.mibs, b.measure = nil, true
			add(ModePool, 1, b.turns(ctx, b.o.Turns, false, whole, func(ctx context.Context) (*sandbox.Environment, error) {
				mu.Lock()
				rec := pool[0]
				pool = pool[1:]
				mu.Unlock()
				return b.p.Claim(ctx, rec, b.request())
			}))
			b.measure = false
			if len(b.mibs) > 0 {
				slices.Sort(b.mibs)
				rep.ClaimedBoxMiB = round3(b.mibs[len(b.mibs)/2])
			}
		}
		if b.wants(ModeSession) {
			add(ModeSession, 1, b.turns(ctx, b.o.Turns, true, whole, func(ctx context.Context) (*sandbox.Environment, error) {
				return b.p.Create(ctx, b.request())
			}))
		}
	}
	compare(rows)
	return rows, ctx.Err()
}

// compare sets each row's ratios to its workload's baseline: the bare
// create for a burst; for a turn the box without spares, else the cold
// one.
func compare(rows []BenchRow) {
	base := map[string][]string{WorkloadBurst: {ModeBare}, WorkloadFirstEvent: {ModeNoSpare, ModeCold},
		WorkloadTurn: {ModeNoSpare, ModeCold}}
	for i := range rows {
		j, bm := -1, ""
		for _, m := range base[rows[i].Workload] {
			if j = slices.IndexFunc(rows, func(r BenchRow) bool { return r.Workload == rows[i].Workload && r.Mode == m }); j >= 0 {
				bm = m
				break
			}
		}
		if j < 0 || j == i || rows[j].P50Ms == 0 || rows[j].P99Ms == 0 || rows[i].OK == 0 {
			continue
		}
		rows[i].Baseline = bm
		rows[i].RatioP50 = round3(rows[i].P50Ms / rows[j].P50Ms)
		rows[i].RatioP99 = round3(rows[i].P99Ms / rows[j].P99Ms)
	}
}
