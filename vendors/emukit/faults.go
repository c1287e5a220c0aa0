package emukit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// Faults are the failures an emulator injects. The zero value injects
// none.
type Faults struct {
	// ErrorRate is the share (0 to 1) of control plane calls that fail
	// with one of Statuses instead of running.
	ErrorRate float64
	// Statuses are the statuses failing calls get, chosen at random: 429
	// or 5xx. Default 429 and 503. A 429 never takes effect: throttling
	// refuses a call before it runs.
	Statuses []int
	// LostRate is the share (0 to 1) of failed calls that may change
	// something (which ones is the emulator's: Options.Lost) that take
	// effect before their 5xx answer, as when a server fails after acting
	// and the answer is lost.
	LostRate float64
	// RetryAfter is the wait a 429 asks for. Default 1s.
	RetryAfter time.Duration
	// CreateDelay delays every sandbox's create by this long.
	CreateDelay time.Duration
	// VanishAfter makes every sandbox vanish (deleted behind its
	// clients' backs, its streams cut) this long after its create. Zero:
	// never.
	VanishAfter time.Duration
}

// Check reports faults out of range: a rate outside 0 to 1, a status
// that is neither 429 nor 5xx, a negative duration.
func (f Faults) Check() error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 || f.LostRate < 0 || f.LostRate > 1 {
		return fmt.Errorf("error rate %v, lost rate %v: want 0 to 1", f.ErrorRate, f.LostRate)
	}
	for _, st := range f.Statuses {
		if st != http.StatusTooManyRequests && (st < 500 || st > 599) {
			return fmt.Errorf("fail status %d: want 429 or 5xx", st)
		}
	}
	if f.RetryAfter < 0 || f.CreateDelay < 0 || f.VanishAfter < 0 {
		return errors.New("negative fault duration")
	}
	return nil
}

// DefaultStatuses are the statuses of failing calls when Faults names
// none.
var DefaultStatuses = []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}

// InjectorOptions configure an Injector: the faults to start with and how
// the emulator's control plane answers a failed call.
type InjectorOptions struct {
	// Faults are the faults injected from the start (see Injector.Set).
	Faults Faults
	// Throttled answers a call refused with 429, asking the client to
	// wait (Faults.RetryAfter, or its default). Required.
	Throttled func(w http.ResponseWriter, r *http.Request, wait time.Duration)
	// Failed answers a call failed with a 5xx status. Required.
	Failed func(w http.ResponseWriter, r *http.Request, status int)
	// Lost reports whether a call failed with a 5xx may have taken effect
	// first (Faults.LostRate). Default: none may.
	Lost func(r *http.Request) bool
}

// Injector holds an emulator's current faults and injects them into the
// calls it serves.
type Injector struct {
	opts   InjectorOptions
	mu     sync.Mutex
	faults Faults
	counts Counts
}

// Counts are the faults an Injector injected: calls refused with 429,
// failed with a 5xx, and of those the ones that took effect first.
type Counts struct{ Throttled, Failed, Lost int64 }

// Counts returns the faults injected so far.
func (in *Injector) Counts() Counts {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.counts
}

func (in *Injector) count(f func(*Counts)) {
	in.mu.Lock()
	f(&in.counts)
	in.mu.Unlock()
}

// NewInjector returns an Injector of opts.
func NewInjector(opts InjectorOptions) (*Injector, error) {
	if opts.Throttled == nil || opts.Failed == nil {
		return nil, errors.New("emukit: an injector needs its Throttled and Failed answers")
	}
	if opts.Lost == nil {
		opts.Lost = func(*http.Request) bool { return false }
	}
	if err := opts.Faults.Check(); err != nil {
		return nil, err
	}
	return &Injector{opts: opts, faults: opts.Faults}, nil
}

// Set replaces the faults injected from now on.
func (in *Injector) Set(f Faults) error {
	if err := f.Check(); err != nil {
		return err
	}
	in.mu.Lock()
	in.faults = f
	in.mu.Unlock()
	return nil
}

// Faults returns the faults injected now.
func (in *Injector) Faults() Faults {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.faults
}

// Serve serves r with h, or fails it as the faults say: a share
// (ErrorRate) of calls is answered with one of Statuses instead; of
// those failed with a 5xx that Lost allows, a share (LostRate) is served
// first with its answer discarded.
func (in *Injector) Serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	f := in.Faults()
	if f.ErrorRate == 0 || rand.Float64() >= f.ErrorRate {
		h.ServeHTTP(w, r)
		return
	}
	statuses := f.Statuses
	if len(statuses) == 0 {
		statuses = DefaultStatuses
	}
	st := statuses[rand.IntN(len(statuses))]
	if st == http.StatusTooManyRequests {
		wait := f.RetryAfter
		if wait == 0 {
			wait = time.Second
		}
		in.count(func(c *Counts) { c.Throttled++ })
		in.opts.Throttled(w, r, wait)
		return
	}
	if in.opts.Lost(r) && rand.Float64() < f.LostRate {
		// The call takes effect; its answer is lost to a failing gateway.
		in.count(func(c *Counts) { c.Lost++ })
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	in.count(func(c *Counts) { c.Failed++ })
	in.opts.Failed(w, r, st)
}

// Delay waits the faults' CreateDelay, or until ctx ends; it reports
// false when ctx ended first. Without a delay it reports true at once.
func (in *Injector) Delay(ctx context.Context) bool {
	d := in.Faults().CreateDelay
	return d <= 0 || vendorhttp.Sleep(ctx, d) == nil
}

// Seconds is a wait in whole seconds, rounded up, as Retry-After headers
// carry it.
func Seconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }
