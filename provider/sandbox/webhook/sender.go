package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultConcurrency = 8
	DefaultTimeout     = 10 * time.Second
	DefaultMinBackoff  = 100 * time.Millisecond
	DefaultMaxBackoff  = time.Minute
	DefaultMaxAge      = 72 * time.Hour
	DefaultKeep        = 24 * time.Hour
	DefaultPoll        = time.Second
)

// pruneEvery is how often a Sender drops the deliveries done more than
// Keep ago (and once at Open).
const pruneEvery = time.Hour

// leaseMargin is how much longer than an attempt's timeout its lease
// lasts: the time to record its outcome.
const leaseMargin = 2 * time.Second

// ErrClosed is the error of Send on a Sender that was closed or whose
// context ended.
var ErrClosed = errors.New("webhook sender closed")

// Options configure a Sender. Path and Endpoints are required; every
// other zero value means its default.
type Options struct {
	// Path is the outbox file (SQLite), created mode 0600 if missing.
	Path string
	// Endpoints receive the events; at least one.
	Endpoints []Endpoint
	// Client makes the attempts. Default: a client that follows no
	// redirect (a 3xx is a failed attempt).
	Client *http.Client
	// Concurrency bounds the attempts in flight. Default:
	// DefaultConcurrency.
	Concurrency int
	// Timeout bounds one attempt. Default: DefaultTimeout.
	Timeout time.Duration
	// MinBackoff is the wait after a delivery's first failed attempt,
	// doubled after each further one up to MaxBackoff; each wait is drawn
	// from its upper half. Defaults: DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxAge is how long after its event a delivery is retried before it
	// is abandoned. Default: DefaultMaxAge.
	MaxAge time.Duration
	// Keep is how long delivered and abandoned deliveries stay in the
	// outbox (for ReadState). Default: DefaultKeep.
	Keep time.Duration
	// Poll is how often the Sender looks for deliveries that another
	// process added to the outbox. Default: DefaultPoll.
	Poll time.Duration
	// Logger receives failed attempts (Debug) and abandoned deliveries
	// (Warn), never a secret. Default: discard.
	Logger *slog.Logger
}

func (o Options) normalized() (Options, error) {
	var errs []error
	if o.Path == "" {
		errs = append(errs, errors.New("Path is required"))
	}
	if len(o.Endpoints) == 0 {
		errs = append(errs, errors.New("Endpoints: want at least one"))
	}
	seen := map[string]bool{}
	for _, e := range o.Endpoints {
		if err := e.check(); err != nil {
			errs = append(errs, err)
		}
		if seen[e.URL] {
			errs = append(errs, fmt.Errorf("endpoint %s: given twice", Redact(e.URL)))
		}
		seen[e.URL] = true
	}
	if o.Concurrency < 0 || o.Timeout < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.MaxAge < 0 || o.Keep < 0 || o.Poll < 0 {
		errs = append(errs, errors.New("Concurrency, Timeout, MinBackoff, MaxBackoff, MaxAge, Keep and Poll may not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("webhook options: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	def(&o.Timeout, DefaultTimeout)
	def(&o.MinBackoff, DefaultMinBackoff)
	def(&o.MaxBackoff, DefaultMaxBackoff)
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	def(&o.MaxAge, DefaultMaxAge)
	def(&o.Keep, DefaultKeep)
	def(&o.Poll, DefaultPoll)
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Sender records events in its outbox and delivers them. It is safe for
// concurrent use.
type Sender struct {
	o         Options
	box       *outbox
	urls      []string
	endpoints map[string]Endpoint

	run    context.Context // ends when the Sender stops
	stop   context.CancelFunc
	wake   chan struct{}      // an event was recorded (capacity 1)
	finish chan struct{}      // Close asks the loop to end once nothing is due
	flush  chan chan struct{} // Flush asks to be told when nothing is pending
	done   chan struct{}      // the loop and its attempts ended
	once   sync.Once

	mu       sync.Mutex
	inflight map[int64]bool // the seqs of this Sender's attempts

	attempts, delivered, failures, retries, abandoned atomic.Int64
}

// Open opens (creating) the outbox at o.Path and starts delivering what
// it holds for o.Endpoints, and what Record adds, until Close or the end
// of ctx. When ctx ends the Sender stops at once, as a process that died
// would: its attempts in flight are left to their leases, and the next
// Sender on the outbox makes them again.
func Open(ctx context.Context, o Options) (*Sender, error) {
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	box, err := openOutbox(ctx, o.Path)
	if err != nil {
		return nil, err
	}
	if err := box.prune(ctx, time.Now().Add(-o.Keep)); err != nil {
		box.close()
		return nil, fmt.Errorf("webhook outbox: %w", err)
	}
	s := &Sender{o: o, box: box, endpoints: map[string]Endpoint{}, wake: make(chan struct{}, 1),
		finish: make(chan struct{}), flush: make(chan chan struct{}), done: make(chan struct{}), inflight: map[int64]bool{}}
	for _, e := range o.Endpoints {
		s.urls = append(s.urls, e.URL)
		s.endpoints[e.URL] = e
	}
	s.run, s.stop = context.WithCancel(ctx)
	go s.loop()
	return s, nil
}

// Record is Send for a callback without an error to return (as
// sandbox.Options.OnEvent): a failure is logged, and the event is then
// not delivered.
func (s *Sender) Record(ev Event) {
	if _, err := s.Send(s.run, ev); err != nil {
		s.o.Logger.Warn("webhook: record event", "type", ev.Type, "err", err)
	}
}

// Send commits ev's deliveries to the endpoints that take its type to the
// outbox and returns the event's id (empty when no endpoint takes it).
// Once it returns, the event survives a crash of this process.
func (s *Sender) Send(ctx context.Context, ev Event) (string, error) {
	if s.run.Err() != nil {
		return "", ErrClosed
	}
	var urls []string
	for _, e := range s.o.Endpoints {
		if e.wants(ev.Type) {
			urls = append(urls, e.URL)
		}
	}
	if len(urls) == 0 {
		return "", nil
	}
	id, body, now, err := message(ev)
	if err != nil {
		return "", err
	}
	if err := s.box.add(ctx, id, body, urls, now); err != nil {
		return "", fmt.Errorf("webhook outbox: %w", err)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return id, nil
}

// Flush delivers until nothing this Sender can deliver is pending (it
// waits out the back-off of failed deliveries) or ctx ends, whose error it
// returns then. The Sender goes on.
func (s *Sender) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case s.flush <- done:
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close delivers what is due until nothing is (a delivery waiting out its
// back-off is not) or ctx ends, then stops: the attempts still in flight
// are abandoned, not recorded, and what is left stays in the outbox for
// the next Sender. It returns ctx's error when it ended first. Flush
// before Close to wait for the retries.
func (s *Sender) Close(ctx context.Context) error {
	s.once.Do(func() { close(s.finish) })
	var err error
	select {
	case <-s.done:
	case <-ctx.Done():
		err = ctx.Err()
		s.stop()
		<-s.done
		// Give back the leases of the attempts cut short, so that the next
		// Sender need not wait for them.
		s.mu.Lock()
		for seq := range s.inflight {
			_ = s.box.release(context.WithoutCancel(ctx), seq)
		}
		s.mu.Unlock()
	}
	s.stop()
	if cerr := s.box.close(); cerr != nil && err == nil {
		err = fmt.Errorf("webhook outbox: %w", cerr)
	}
	return err
}

// loop claims due deliveries and attempts them, at most Concurrency at a
// time, until the Sender stops (or, once Close asked, nothing is due).
func (s *Sender) loop() {
	var wg sync.WaitGroup
	defer close(s.done)
	defer wg.Wait()
	ended := make(chan struct{}, s.o.Concurrency)
	busy := 0
	finishing := s.finish
	closing := false
	var flushers []chan struct{}
	pruned := time.Now() // Open pruned
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if time.Since(pruned) > pruneEvery {
			pruned = time.Now()
			if err := s.box.prune(s.run, pruned.Add(-s.o.Keep)); err != nil && s.run.Err() == nil {
				s.o.Logger.Warn("webhook outbox: prune", "err", err)
			}
		}
		failed := false // the outbox failed: look again after Poll
		if free := s.o.Concurrency - busy; free > 0 {
			now := time.Now()
			ds, err := s.box.claim(s.run, s.urls, now, now.Add(s.o.Timeout+leaseMargin), free)
			if s.run.Err() != nil {
				return
			}
			if err != nil {
				failed = true
				s.o.Logger.Warn("webhook outbox: claim", "err", err)
			}
			for _, d := range ds {
				busy++
				s.mu.Lock()
				s.inflight[d.seq] = true
				s.mu.Unlock()
				wg.Go(func() {
					s.attempt(d)
					ended <- struct{}{}
				})
			}
		}
		wait := s.o.Poll // at most: deliveries other processes add
		if busy < s.o.Concurrency {
			// Else an attempt's end wakes the loop.
			next, err := s.box.nextDue(s.run, s.urls)
			switch {
			case s.run.Err() != nil:
				return
			case err != nil:
				s.o.Logger.Warn("webhook outbox: next", "err", err)
			case next.IsZero() && busy == 0:
				for _, f := range flushers {
					close(f) // Flush: nothing pending
				}
				flushers = nil
				if closing {
					return
				}
			case next.IsZero():
				// Cannot be while attempts are in flight; their end wakes the
				// loop anyway.
			case closing && busy == 0 && next.After(time.Now()):
				return // Close: nothing due
			case !failed:
				wait = min(wait, max(time.Until(next), 0))
			}
		}
		timer.Reset(wait)
		select {
		case <-s.run.Done():
			return
		case <-ended:
			busy--
		case <-s.wake:
		case <-finishing:
			closing, finishing = true, nil
		case f := <-s.flush:
			flushers = append(flushers, f)
		case <-timer.C:
		}
	}
}

// attempt POSTs d once and records the outcome.
func (s *Sender) attempt(d delivery) {
	e := s.endpoints[d.url]
	status, retryAfter, err := s.post(e, d)
	if s.run.Err() != nil {
		return // stopped: the lease decides (Close gives it back)
	}
	defer func() {
		s.mu.Lock()
		delete(s.inflight, d.seq)
		s.mu.Unlock()
	}()
	s.attempts.Add(1)
	if d.attempts > 0 {
		s.retries.Add(1)
	}
	now := time.Now()
	if err == nil {
		s.delivered.Add(1)
		if err := s.box.delivered(s.run, d.seq, status, now); err != nil && s.run.Err() == nil {
			s.o.Logger.Warn("webhook outbox: record delivery", "id", d.id, "err", err)
		}
		return
	}
	s.failures.Add(1)
	abandon := now.Sub(d.created) > s.o.MaxAge
	next := now.Add(s.backoff(d.attempts+1, retryAfter))
	if abandon {
		s.abandoned.Add(1)
		next = now
		s.o.Logger.Warn("webhook: delivery abandoned", "endpoint", e, "id", d.id, "attempts", d.attempts+1, "err", err)
	} else {
		s.o.Logger.Debug("webhook: attempt failed", "endpoint", e, "id", d.id, "attempt", d.attempts+1, "err", err)
	}
	if werr := s.box.failed(s.run, d.seq, status, err.Error(), next, abandon); werr != nil && s.run.Err() == nil {
		s.o.Logger.Warn("webhook outbox: record attempt", "id", d.id, "err", werr)
	}
}

// post makes one attempt; the error never quotes the URL.
func (s *Sender) post(e Endpoint, d delivery) (status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(s.run, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(d.body))
	if err != nil {
		return 0, 0, errors.New("bad request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "boxctl-webhook/1")
	if err := Sign(req.Header, e.Secret, d.id, time.Now(), d.body); err != nil {
		return 0, 0, err
	}
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return 0, 0, errors.New(redactErr(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, 0, nil
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			retryAfter = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			retryAfter = time.Until(t)
		}
	}
	return resp.StatusCode, retryAfter, fmt.Errorf("status %d", resp.StatusCode)
}

// backoff is the wait after a delivery's n-th failed attempt: MinBackoff
// doubled n-1 times, capped at MaxBackoff, drawn from its upper half; not
// shorter than retryAfter within MaxBackoff.
func (s *Sender) backoff(n int, retryAfter time.Duration) time.Duration {
	d := s.o.MaxBackoff
	if n <= 32 {
		d = min(s.o.MinBackoff<<(n-1), s.o.MaxBackoff)
		if d <= 0 {
			d = s.o.MaxBackoff
		}
	}
	d = d/2 + rand.N(d/2+1)
	return max(d, min(retryAfter, s.o.MaxBackoff))
}
