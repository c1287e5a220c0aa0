package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// Defaults of Options.
const (
	DefaultSize        = 2
	DefaultMaxAge      = time.Hour
	DefaultWaitTimeout = time.Minute
	DefaultMaxFailures = 3
	DefaultBackoff     = 30 * time.Second
	DefaultCheckEvery  = 10 * time.Second
	DefaultParallel    = 2
)

// Outcome says how a claim got its box.
type Outcome string

// Outcomes.
const (
	// Hit is a box that waited in the pool.
	Hit Outcome = "hit"
	// Waited is a box the claim waited for (the pool was empty).
	Waited Outcome = "waited"
	// Cold is a box created for the claim (the pool was empty).
	Cold Outcome = "miss-cold"
)

// Errors of Claim.
var (
	// ErrQueueFull is a waiting claim over Options.MaxQueue.
	ErrQueueFull = errors.New("pool: too many claims waiting")
	// ErrWaitTimeout is a waiting claim that got no box in time.
	ErrWaitTimeout = errors.New("pool: no box within the wait")
	// ErrClosed is a claim of a closed pool.
	ErrClosed = errors.New("pool: closed")
)

// Options configure a Pool. Provider, Name and Harness are required;
// every other zero value means the default.
type Options struct {
	// Provider boots and claims the boxes; its Options.Lifetime is the
	// longest lifetime a claim may ask.
	Provider *sandbox.Provider
	// Name is the pool's name (Name), its file's and its boxes' label.
	Name string
	// Harness is the harness of every box.
	Harness string
	// Dir holds the pool's file. Default: DefaultDir.
	Dir string
	// Size is how many boxes wait (DefaultSize).
	Size int
	// MaxAge is how long a box waits before it is recycled (DefaultMaxAge).
	MaxAge time.Duration
	// Wait makes a claim of an empty pool wait for a box, up to
	// WaitTimeout (DefaultWaitTimeout) or its context; otherwise it
	// creates a box cold.
	Wait        bool
	WaitTimeout time.Duration
	// MaxQueue bounds the claims waiting at once (default 4 × Size).
	MaxQueue int
	// MaxFailures boots failing in a row open the breaker
	// (DefaultMaxFailures): no boot for Backoff (DefaultBackoff).
	MaxFailures int
	Backoff     time.Duration
	// CheckEvery is how often waiting boxes are checked (DefaultCheckEvery).
	CheckEvery time.Duration
	// Parallel bounds the boots under way at once (DefaultParallel).
	Parallel int
	// Logger receives the keeper's progress, never a secret.
	Logger *slog.Logger
}

func (o Options) normalized() (Options, error) {
	switch {
	case o.Provider == nil:
		return o, errors.New("pool: Provider is required")
	case o.Harness == "":
		return o, errors.New("pool: Harness is required")
	case o.Size < 0 || o.MaxAge < 0 || o.WaitTimeout < 0 || o.MaxQueue < 0 || o.Backoff < 0:
		return o, errors.New("pool: sizes and durations must not be negative")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Size, DefaultSize)
	def(&o.MaxQueue, 4*o.Size)
	def(&o.MaxFailures, DefaultMaxFailures)
	def(&o.Parallel, DefaultParallel)
	defd(&o.MaxAge, DefaultMaxAge)
	defd(&o.WaitTimeout, DefaultWaitTimeout)
	defd(&o.Backoff, DefaultBackoff)
	defd(&o.CheckEvery, DefaultCheckEvery)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Pool keeps one pool full and claims from it. It is safe for concurrent
// use.
type Pool struct {
	o     Options
	reg   registry
	owner string
	m     counters

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	mu        sync.Mutex
	booting   int
	failures  int
	openUntil time.Time
	waiting   int
	handing   int           // claims taking a box of the pool now
	yielded   time.Time     // when refill first yielded to them (zero: not now)
	avail     chan struct{} // closed when a box was added
	closed    bool
	lastErr   string
}

// New starts the keeper of a pool; it boots boxes in the background.
func New(o Options) (*Pool, error) {
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	reg, err := newRegistry(o.Dir, o.Name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{o: o, reg: reg, owner: reaper.ProcessOwner(), ctx: ctx, cancel: cancel,
		kick: make(chan struct{}, 1), avail: make(chan struct{})}
	p.wg.Go(p.run)
	return p, nil
}

// Stats returns the keeper's snapshot; Ready counts its boxes in the
// pool's file.
func (p *Pool) Stats() Stats {
	ready := len(p.own())
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m.stats()
	s.Ready, s.Booting, s.Waiting, s.Size = ready, p.booting, p.waiting, p.o.Size
	s.BreakerOpen = time.Now().Before(p.openUntil)
	s.LastError = p.lastErr
	return s
}

// own returns the keeper's boxes in the file.
func (p *Pool) own() []sandbox.StandbyRecord {
	f, err := p.reg.load()
	if err != nil {
		return nil
	}
	var out []sandbox.StandbyRecord
	for _, b := range f.Boxes {
		if b.Keeper == p.owner {
			out = append(out, b)
		}
	}
	return out
}

func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Pool) run() {
	check := time.NewTicker(p.o.CheckEvery)
	defer check.Stop()
	for {
		p.refill()
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-check.C:
			p.heal()
		}
	}
}

// refillYield is the longest refill waits for claims under way: boots
// compete with their handovers for the host (on Docker, the engine's and
// the boxes' CPU), so a burst of claims is served first and the pool
// refilled after it, or after this at the latest.
const refillYield = 250 * time.Millisecond

// refill starts boots until the pool's boxes and boots make its size. It
// yields to claims under way (refillYield), unless claims wait for a box.
func (p *Pool) refill() {
	have := len(p.own())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || time.Now().Before(p.openUntil) {
		return
	}
	if p.yields(time.Now()) {
		return
	}
	for have+p.booting < p.o.Size && p.booting < p.o.Parallel {
		p.booting++
		p.wg.Go(p.boot)
	}
}

// yields reports whether a refill at now waits for the claims under way
// (p.mu held). The first wait asks for a refill at its end.
func (p *Pool) yields(now time.Time) bool {
	if p.handing == 0 || p.waiting > 0 {
		p.yielded = time.Time{}
		return false
	}
	if p.yielded.IsZero() {
		p.yielded = now
		time.AfterFunc(refillYield, p.poke)
	}
	if now.Sub(p.yielded) < refillYield {
		return true
	}
	p.yielded = time.Time{}
	return false
}

func (p *Pool) boot() {
	start := time.Now()
	rec, err := p.o.Provider.Standby(p.ctx, sandbox.StandbySpec{Harness: p.o.Harness, Pool: p.o.Name, MaxAge: p.o.MaxAge})
	if err == nil {
		if err = p.reg.update(context.WithoutCancel(p.ctx), func(f *poolFile) error {
			f.Boxes = append(f.Boxes, rec)
			return nil
		}); err != nil {
			err = errors.Join(err, p.o.Provider.DestroyStandby(context.WithoutCancel(p.ctx), rec))
		}
	}
	p.mu.Lock()
	p.booting--
	p.lastErr = ""
	if err != nil {
		p.lastErr = err.Error()
		p.failures++
		p.m.failures.Add(1)
		if p.failures >= p.o.MaxFailures {
			p.openUntil = time.Now().Add(p.o.Backoff)
			p.failures = 0
			p.o.Logger.Warn("boots fail in a row: pausing", "pool", p.o.Name, "for", p.o.Backoff, "err", err)
		} else if p.ctx.Err() == nil {
			p.o.Logger.Warn("boot failed", "pool", p.o.Name, "err", err)
		}
	} else {
		p.failures = 0
		p.m.observeRefill(time.Since(start))
		close(p.avail)
		p.avail = make(chan struct{})
		p.o.Logger.Debug("box ready", "pool", p.o.Name, "box", rec.BoxID, "took", time.Since(start))
	}
	p.mu.Unlock()
	if err == nil || p.ctx.Err() == nil {
		p.poke()
	}
}

// heal recycles the keeper's boxes past MaxAge and replaces those that
// no longer wait in standby.
func (p *Pool) heal() {
	for _, rec := range p.own() {
		reason := ""
		if time.Since(rec.Created) > p.o.MaxAge {
			reason = "recycled"
		} else if err := p.o.Provider.CheckStandby(p.ctx, rec); err != nil && p.ctx.Err() == nil {
			reason = "unhealthy"
		}
		if reason == "" {
			continue
		}
		// Only a box still in the file is the keeper's to remove: a
		// claimer may have taken it since.
		if ok, err := p.reg.remove(p.ctx, rec.BoxID); err != nil || !ok {
			continue
		}
		if err := p.o.Provider.DestroyStandby(context.WithoutCancel(p.ctx), rec); err != nil {
			p.o.Logger.Warn("destroy", "box", rec.BoxID, "err", err)
		}
		if reason == "recycled" {
			p.m.recycled.Add(1)
		} else {
			p.m.healed.Add(1)
		}
	}
}

// Claim returns the environment of req in a box of the pool: one that
// waits (Hit), else, with Options.Wait, the next one ready (Waited),
// else a box created cold (Cold). A box whose claim fails is destroyed
// and the next one tried.
func (p *Pool) Claim(ctx context.Context, req sandbox.CreateRequest) (*sandbox.Environment, Outcome, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, "", ErrClosed
	}
	p.m.claims.Add(1)
	defer p.poke()
	p.mu.Lock()
	p.handing++
	p.mu.Unlock()
	e, err := claimTaken(ctx, p.o.Provider, p.reg, req)
	p.mu.Lock()
	p.handing--
	p.mu.Unlock()
	if e != nil || err != nil {
		if e != nil {
			p.m.hits.Add(1)
		}
		return e, Hit, err
	}
	if !p.o.Wait {
		p.m.misses.Add(1)
		e, err := p.o.Provider.Create(ctx, req)
		return e, Cold, err
	}
	p.mu.Lock()
	if p.waiting >= p.o.MaxQueue {
		p.mu.Unlock()
		return nil, "", ErrQueueFull
	}
	p.waiting++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
	}()
	wctx, cancel := context.WithTimeoutCause(ctx, p.o.WaitTimeout, ErrWaitTimeout)
	defer cancel()
	for {
		p.mu.Lock()
		avail := p.avail
		p.mu.Unlock()
		p.poke()
		select {
		case <-avail:
		case <-wctx.Done():
			return nil, "", fmt.Errorf("claim: %w", context.Cause(wctx))
		case <-p.ctx.Done():
			return nil, "", ErrClosed
		}
		e, err := claimTaken(ctx, p.o.Provider, p.reg, req)
		if e != nil || err != nil {
			if e != nil {
				p.m.waits.Add(1)
			}
			return e, Waited, err
		}
	}
}

// claimAttempts bounds the boxes one claim tries before it gives up on
// the pool.
const claimAttempts = 3

// claimTaken takes boxes from reg and claims them until one claim
// succeeds; (nil, nil) means the pool had no box that would.
func claimTaken(ctx context.Context, prov *sandbox.Provider, reg registry, req sandbox.CreateRequest) (*sandbox.Environment, error) {
	life := req.Lifetime
	if life == 0 {
		life = prov.Lifetime()
	}
	for range claimAttempts {
		rec, ok, err := reg.take(ctx, req.Profile.Harness, time.Now().Add(life+time.Minute))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, nil
		}
		e, err := prov.Claim(ctx, rec, req)
		if err == nil {
			return e, nil
		}
		if ctx.Err() != nil {
			_ = prov.DestroyStandby(context.WithoutCancel(ctx), rec)
			return nil, err
		}
		// A vanished or broken box: gone with its claim, and the next.
		_ = prov.DestroyStandby(context.WithoutCancel(ctx), rec)
	}
	return nil, nil
}

// ClaimFrom claims req from the pool name in dir without a keeper of its
// own (another process keeps it): a box that waits (Hit), else a cold
// create (Cold).
func ClaimFrom(ctx context.Context, prov *sandbox.Provider, dir, name string, req sandbox.CreateRequest) (*sandbox.Environment, Outcome, error) {
	reg, err := newRegistry(dir, name)
	if err != nil {
		return nil, "", err
	}
	if e, err := claimTaken(ctx, prov, reg, req); e != nil || err != nil {
		return e, Hit, err
	}
	e, err := prov.Create(ctx, req)
	if e != nil && slices.ContainsFunc(e.Timings(), func(ph sandbox.Phase) bool { return ph.Name == sandbox.PhaseVendorClaim }) {
		// The vendor's own pool served it (a Kubernetes warm pool).
		return e, Hit, err
	}
	return e, Cold, err
}

// Close stops the keeper and drains the pool: boots under way end, and
// the keeper's boxes still waiting are destroyed. Waiting claims end with
// ErrClosed.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	var errs []error
	for _, rec := range p.own() {
		if ok, err := p.reg.remove(ctx, rec.BoxID); err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		if err := p.o.Provider.DestroyStandby(ctx, rec); err != nil {
			errs = append(errs, fmt.Errorf("destroy %s: %w", rec.BoxID, err))
		}
	}
	return errors.Join(errs...)
}

// Name is the pool's name.
func (p *Pool) Name() string { return p.o.Name }
