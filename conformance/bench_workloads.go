package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tangle-network/boxctl/internal/pressure"
	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// sample is one timed sample of a burst: its time, and what removes
// what it made (nil: nothing left).
type sample func(context.Context) (time.Duration, func(context.Context) error, error)

// burst runs n samples of f at once. What the samples made is removed
// once the last one answered (untimed), a few at a time: a box removed
// while others are still timed would weigh on their figures, and no
// user's burst removes its boxes before it has them all.
func (b *bencher) burst(ctx context.Context, n int, f sample) *samples {
	s := &samples{n: n}
	start := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		removers []func(context.Context) error
	)
	for range n {
		wg.Go(func() {
			<-start
			d, remove, err := f(ctx)
			s.add(d, err)
			if remove != nil {
				mu.Lock()
				removers = append(removers, remove)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	var g errgroup.Group
	g.SetLimit(8)
	for _, remove := range removers {
		g.Go(func() error {
			destroyQuietly(ctx, remove)
			return nil
		})
	}
	_ = g.Wait()
	return s
}

// nodeVersion is the command a burst runs in each box once it is up.
var nodeVersion = vendors.ExecSpec{Command: []string{"node", "-v"}}

// execer runs a command in a box: a vendor's box (its exec goes through
// the vendor), or an environment (through the box's bridge).
type execer interface {
	Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error)
}

// interactive runs `node -v` through x and checks its answer.
func interactive(ctx context.Context, x execer) error {
	res, err := x.Exec(ctx, nodeVersion)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 || !bytes.HasPrefix(res.Stdout, []byte("v")) {
		return fmt.Errorf("node -v: exit %d, %q", res.ExitCode, bytes.TrimSpace(append(res.Stdout, res.Stderr...)))
	}
	return nil
}

// bare is one sample of the vendor's own create of the image: created and
// `node -v` answered; the box is removed after the burst.
func (b *bencher) bare(ctx context.Context) (time.Duration, func(context.Context) error, error) {
	if br, ok := b.r.t.Vendor.(BareRunner); ok {
		return br.BareRun(ctx, b.r.t.Image, nodeVersion.Command)
	}
	spec := vendors.CreateSpec{Image: b.r.t.Image, Lifetime: b.o.Lifetime, RunTag: sandbox.NewRunTag()}
	start := time.Now()
	box, err := b.r.t.Vendor.Create(ctx, spec)
	if err != nil {
		return 0, nil, err
	}
	if err := interactive(ctx, box); err != nil {
		destroyQuietly(ctx, box.Destroy)
		return 0, nil, err
	}
	return time.Since(start), box.Destroy, nil
}

// BareRunner is a vendor with a baseline create more bare than its own
// Create: Docker's is `docker run` of the image, without the network,
// labels and limits boxctl gives a box. BareRun creates a container of
// image and runs cmd in it; it returns the time from the request to
// cmd's answer and what removes the container (it removes one that
// failed itself).
type BareRunner interface {
	BareRun(ctx context.Context, image string, cmd []string) (time.Duration, func(context.Context) error, error)
}

// coldInteractive is one sample of boxctl's create: the environment
// ready and `node -v` answered; it is destroyed after the burst.
func (b *bencher) coldInteractive(ctx context.Context) (time.Duration, func(context.Context) error, error) {
	start := time.Now()
	env, err := b.p.Create(ctx, b.request())
	if err != nil {
		return 0, nil, err
	}
	return b.interactiveSince(ctx, start, env)
}

// interactiveSince runs `node -v` in env (through its bridge, as a
// program driving the box would), records env's phases and returns the
// time from start to the answer and env's Destroy (env is destroyed now
// when it failed).
func (b *bencher) interactiveSince(ctx context.Context, start time.Time, env *sandbox.Environment) (time.Duration, func(context.Context) error, error) {
	if err := interactive(ctx, env); err != nil {
		destroyQuietly(ctx, env.Destroy)
		return 0, nil, err
	}
	d := time.Since(start)
	b.phases(env)
	return d, env.Destroy, nil
}

// phases records env's create phases for the row being measured.
func (b *bencher) phases(env *sandbox.Environment) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ph := range env.Timings() {
		if b.phase == nil {
			b.phase = map[string][]time.Duration{}
		}
		b.phase[ph.Name] = append(b.phase[ph.Name], ph.Duration)
	}
}

// takePhases returns the medians of the phases recorded since the last
// call, and forgets them.
func (b *bencher) takePhases() map[string]float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.phase) == 0 {
		return nil
	}
	out := map[string]float64{}
	for name, ds := range b.phase {
		slices.Sort(ds)
		out[name] = quantileMs(ds, 0.5)
	}
	b.phase = nil
	return out
}

// standbys boots n standby boxes, a few at a time (untimed). A box may
// wait twice the lifetime for its claim: the whole pool phase, whose boot
// of a hundred boxes can take longer than a lifetime on a small machine (a
// claim asking more than its standby box has left is refused), while the
// standby box's own lifetime (that and the claim's) stays within an hour
// for the default lifetime, the most E2B's base tier grants.
func (b *bencher) standbys(ctx context.Context, n int) ([]sandbox.StandbyRecord, error) {
	recs := make([]sandbox.StandbyRecord, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(runtime.NumCPU(), 4))
	for i := range recs {
		g.Go(func() (err error) {
			recs[i], err = b.p.Standby(gctx, sandbox.StandbySpec{Harness: b.o.Harness, Pool: "bench", MaxAge: 2 * b.o.Lifetime})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		for _, rec := range recs {
			if rec.BoxID != "" {
				_ = b.p.DestroyStandby(context.WithoutCancel(ctx), rec)
			}
		}
		return nil, fmt.Errorf("standby boxes: %w", err)
	}
	return recs, nil
}

// poolBurst claims n standby boxes at once, each timed to its `node -v`
// answer, and measures a few of them before their claim.
func (b *bencher) poolBurst(ctx context.Context, n int) (*samples, float64, error) {
	recs, err := b.standbys(ctx, n)
	if err != nil {
		return nil, 0, err
	}
	b.settle(ctx)
	// A pooled box's memory, before its claim, of a few of them.
	var mibs []float64
	for _, rec := range recs[:min(len(recs), 5)] {
		if box, err := b.r.t.Vendor.Connect(ctx, rec.BoxID); err == nil {
			if mib, err := boxMiB(ctx, box); err == nil {
				mibs = append(mibs, mib)
			}
		}
	}
	var (
		mu   sync.Mutex
		next int
	)
	s := b.burst(ctx, n, func(ctx context.Context) (time.Duration, func(context.Context) error, error) {
		mu.Lock()
		rec := recs[next]
		next++
		mu.Unlock()
		start := time.Now()
		env, err := b.p.Claim(ctx, rec, b.request())
		if err != nil {
			_ = b.p.DestroyStandby(context.WithoutCancel(ctx), rec)
			return 0, nil, err
		}
		return b.interactiveSince(ctx, start, env)
	})
	if len(mibs) == 0 {
		return s, 0, nil
	}
	slices.Sort(mibs)
	return s, round3(mibs[len(mibs)/2]), nil
}

// settleWindow is how long the machine stays quiet for a pool to count as
// settled.
const settleWindow = 2 * time.Second

// settle waits, at most BenchOptions.Settle, until a pool just booted is as one in
// use, booted well before its claims: its boxes have started their
// harnesses, each once the machine was quiet. It waits for this
// machine's quiet (the Docker boxes' machine; elsewhere a short wait).
func (b *bencher) settle(ctx context.Context) {
	if b.o.Settle <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.Settle)
	defer cancel()
	start := time.Now()
	// Quiet for a while: the boxes' own waits for a quiet machine end
	// with the first quiet window, and their harnesses' starts then make
	// it busy again.
	err := pressure.Gate{Window: settleWindow}.Wait(ctx)
	b.log.Info("pool boxes settled", "took", time.Since(start).Round(time.Millisecond), "err", err)
}

// boxMiB is the resident memory of every process in box, in MiB.
func boxMiB(ctx context.Context, box vendors.Box) (float64, error) {
	res, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "cat /proc/[0-9]*/status 2>/dev/null; true"}})
	if err != nil {
		return 0, err
	}
	return sumRSS(res.Stdout), nil
}

// sumRSS adds up the VmRSS lines of /proc/*/status output, in MiB. The
// exec's own processes (the reading sh and cat) are left out.
func sumRSS(status []byte) float64 {
	var kib int64
	sc := bufio.NewScanner(bytes.NewReader(status))
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Name:"); ok {
			name = strings.TrimSpace(v)
			continue
		}
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok || name == "cat" {
			continue
		}
		f := strings.Fields(v)
		if len(f) > 0 {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				kib += n
			}
		}
	}
	return float64(kib) / 1024
}

// turns times n turns one after the other, each on an environment mk
// gives (untimed) and destroys after: to the first agent event, or with
// whole to the turn's end. With second, the timed turn is the second of
// its session (the first one untimed).
func (b *bencher) turns(ctx context.Context, n int, second, whole bool, mk func(context.Context) (*sandbox.Environment, error)) *samples {
	s := &samples{n: n}
	for range n {
		if ctx.Err() != nil {
			s.add(0, ctx.Err())
			continue
		}
		s.add(b.turn(ctx, second, whole, mk))
	}
	return s
}

func (b *bencher) turn(ctx context.Context, second, whole bool, mk func(context.Context) (*sandbox.Environment, error)) (time.Duration, error) {
	env, err := mk(ctx)
	if err != nil {
		return 0, err
	}
	defer destroyQuietly(ctx, env.Destroy)
	session := newID("bench")
	if second {
		if _, err := timeTurn(ctx, env, session, true); err != nil {
			return 0, fmt.Errorf("the session's first turn: %w", err)
		}
	}
	if err := vendorhttp.Sleep(ctx, b.o.Pause); err != nil {
		return 0, err
	}
	if b.measure {
		if mib, err := boxMiB(ctx, env.Box()); err == nil {
			b.mibs = append(b.mibs, mib)
		}
	}
	return timeTurn(ctx, env, session, whole)
}

// timeTurn streams one turn of session and returns the time from the
// request to its first agent event (an event other than the client's
// execution.started), or with whole to its successful end.
func timeTurn(ctx context.Context, env *sandbox.Environment, session string, whole bool) (time.Duration, error) {
	start := time.Now()
	var first time.Duration
	var last provider.Event
	for ev, err := range env.Stream(ctx, provider.Turn{Prompt: benchPrompt, SessionID: session}) {
		if err != nil {
			return 0, err
		}
		if first == 0 && ev.Type != provider.EventExecutionStarted {
			first = time.Since(start)
		}
		last = ev
	}
	if !completed(last) {
		return 0, fmt.Errorf("the turn ended with %s %s %q", last.Type, last.Status, last.Detail)
	}
	if first == 0 {
		return 0, errors.New("the turn had no agent event")
	}
	if whole {
		return time.Since(start), nil
	}
	return first, nil
}

func destroyQuietly(ctx context.Context, destroy func(context.Context) error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = destroy(dctx)
}

// samples collects one row's measurements.
type samples struct {
	mu   sync.Mutex
	n    int
	ds   []time.Duration
	errs []string
}

func (s *samples) add(d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if msg := err.Error(); len(s.errs) < 5 && !slices.Contains(s.errs, msg) {
			s.errs = append(s.errs, msg)
		}
		return
	}
	s.ds = append(s.ds, d)
}

func (s *samples) row(workload, mode string, conc int) BenchRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := BenchRow{Workload: workload, Mode: mode, Concurrency: conc, N: s.n, OK: len(s.ds), Errors: s.errs}
	if s.n > 0 {
		r.SuccessRate = round3(float64(r.OK) / float64(s.n))
	}
	if len(s.ds) == 0 {
		return r
	}
	ds := slices.Clone(s.ds)
	slices.Sort(ds)
	r.P50Ms, r.P95Ms, r.P99Ms = quantileMs(ds, 0.50), quantileMs(ds, 0.95), quantileMs(ds, 0.99)
	r.MinMs, r.MaxMs = ms(ds[0]), ms(ds[len(ds)-1])
	return r
}

// quantileMs is the q quantile of sorted ds (nearest rank), in
// milliseconds.
func quantileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return ms(sorted[i])
}

func ms(d time.Duration) float64 { return round3(float64(d.Microseconds()) / 1000) }

func round3(f float64) float64 {
	return float64(int64(f*1000+0.5)) / 1000
}

// hostMemoryMiB is this machine's memory in MiB, from /proc/meminfo; 0
// where there is none.
func hostMemoryMiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				if kib, err := strconv.ParseFloat(f[0], 64); err == nil {
					return round3(kib / 1024)
				}
			}
		}
	}
	return 0
}
