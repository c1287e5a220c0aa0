package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/webhook"
)

var (
	chaosEvents = flag.Int("webhook-events", 200, "lifecycle events TestSender_Chaos sends (1000 for the full size)")
	chaosReal   = flag.Bool("webhook-real", false, "run TestSender_Chaos in real time over loopback HTTP (default: in virtual time, in memory)")
)

// The chaos plan: events sent at an even pace over chaosSpan, the
// receiver down from outageFrom for outageFor, the sender closed and
// reopened after a quarter of the events and stopped abruptly (its
// context cancelled, no Close) after four fifths.
const (
	chaosSpan  = 25 * time.Second
	outageFrom = 8 * time.Second
	outageFor  = 10 * time.Second
	failRate   = 0.30
)

// receiver is an endpoint that fails failRate of the requests: half of
// those before it takes the event, half after (so the sender retries
// what was taken: a duplicate), and refuses every request while down.
type receiver struct {
	secret string

	mu       sync.Mutex
	rng      *rand.Rand
	down     bool
	hold     chan struct{}        // while set, requests wait for it to close
	held     []string             // the ids of the requests that waited
	first    map[string]time.Time // id -> when first taken
	bodies   map[string][]byte
	tries    map[string]int // id -> requests with a valid signature
	requests int            // that reached the handler
	refused  int            // while down
	failed   int            // answered 5xx
	dups     int            // taken again
	bad      []string
}

func newReceiver(secret string) *receiver {
	return &receiver{secret: secret, rng: rand.New(rand.NewPCG(39, 1)), first: map[string]time.Time{}, bodies: map[string][]byte{},
		tries: map[string]int{}}
}

func (rc *receiver) setDown(down bool) {
	rc.mu.Lock()
	rc.down = down
	rc.mu.Unlock()
}

// isDown counts a refused connection.
func (rc *receiver) isDown() bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.down {
		rc.refused++
	}
	return rc.down
}

// stall has requests wait until release.
func (rc *receiver) stall() (release func()) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	hold := make(chan struct{})
	rc.hold = hold
	return func() {
		rc.mu.Lock()
		rc.hold = nil
		rc.mu.Unlock()
		close(hold)
	}
}

func (rc *receiver) stalled() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.held)
}

func (rc *receiver) taken() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.first)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rc.isDown() {
		// Down: the connection drops without an answer.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(r.Body)
	rc.mu.Lock()
	hold := rc.hold
	if hold != nil {
		rc.held = append(rc.held, r.Header.Get(webhook.HeaderID))
	}
	rc.mu.Unlock()
	if hold != nil {
		<-hold
	}
	// The receiver's own work on a request: 1 to 20 ms.
	time.Sleep(time.Millisecond + rand.N(19*time.Millisecond))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	if err != nil {
		rc.bad = append(rc.bad, "read: "+err.Error())
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	if err := webhook.Verify(rc.secret, r.Header, body, 0); err != nil {
		rc.bad = append(rc.bad, "verify: "+err.Error())
		http.Error(w, "signature", http.StatusBadRequest)
		return
	}
	rc.tries[r.Header.Get(webhook.HeaderID)]++
	fail := rc.rng.Float64() < failRate
	if fail && rc.rng.IntN(2) == 0 {
		rc.failed++
		http.Error(w, "flaky", http.StatusInternalServerError)
		return
	}
	id := r.Header.Get(webhook.HeaderID)
	if prev, ok := rc.bodies[id]; ok {
		rc.dups++
		if !bytes.Equal(prev, body) {
			rc.bad = append(rc.bad, "duplicate "+id+" with another body")
		}
	} else {
		rc.first[id], rc.bodies[id] = time.Now(), body
	}
	if fail {
		rc.failed++
		http.Error(w, "flaky after taking it", http.StatusBadGateway)
	}
}

// memTransport hands each request to the receiver in this goroutine, or
// fails it while the receiver is down: no network, so virtual time
// (synctest) runs it.
type memTransport struct{ rc *receiver }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if m.rc.isDown() {
		return nil, errors.New("connection refused")
	}
	rec := httptest.NewRecorder()
	m.rc.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// chaosEvent is the i-th lifecycle event of the plan.
func chaosEvent(i int) webhook.Event {
	types := []sandbox.EventType{sandbox.EventCreated, sandbox.EventReady, sandbox.EventTurnStarted, sandbox.EventTurnEnded, sandbox.EventDestroyed}
	ev := sandbox.Event{Type: types[i%len(types)], Vendor: "docker", BoxID: fmt.Sprintf("box-%d", i/len(types)), RunTag: "chaos"}
	switch ev.Type {
	case sandbox.EventTurnEnded:
		ev.Reason, ev.RunID, ev.Usage = "completed", fmt.Sprintf("run-%d", i), &broker.Usage{Requests: 2, InputTokens: 120, OutputTokens: 40}
	case sandbox.EventDestroyed:
		ev.Reason = sandbox.ReasonUser
	}
	return sandbox.WebhookEvent(ev)
}

// TestSender_Chaos sends lifecycle events to a receiver that fails 30% of
// the requests and is down for 10 s in the middle, through a Close and
// reopen and an abrupt stop of the sender: every event is delivered,
// every request's signature is valid, a duplicate has its first's id and
// body, and outside the outage and the abrupt stop p99 of the delay from
// Send to the receiver taking the event is at most 2 s.
// -webhook-events sets the size, -webhook-real runs it in real time over
// loopback HTTP instead of virtual time in memory.
func TestSender_Chaos(t *testing.T) {
	if *chaosReal {
		runChaos(t, *chaosEvents, true)
		return
	}
	synctest.Test(t, func(t *testing.T) { runChaos(t, *chaosEvents, false) })
}

func runChaos(t *testing.T, n int, real bool) {
	secret := webhook.NewSecret()
	rc := newReceiver(secret)
	endpoint := webhook.Endpoint{URL: "http://receiver.test/hooks/boxes", Secret: secret}
	client := &http.Client{Transport: memTransport{rc}}
	if real {
		srv := httptest.NewServer(rc)
		t.Cleanup(srv.Close)
		endpoint.URL, client = srv.URL+"/hooks/boxes", srv.Client()
	}
	o := webhook.Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Endpoints: []webhook.Endpoint{endpoint}, Client: client, Timeout: 2 * time.Second}
	var senders []*webhook.Sender
	t.Cleanup(func() {
		for _, s := range senders {
			_ = s.Close(context.Background()) // the one stopped abruptly closes its file here
		}
	})
	open := func() (*webhook.Sender, context.CancelFunc) {
		ctx, cancel := context.WithCancel(t.Context())
		s, err := webhook.Open(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		senders = append(senders, s)
		return s, cancel
	}
	s, cancel := open()
	var (
		sent             = map[string]time.Time{}
		start            = time.Now()
		outageAt         = start.Add(outageFrom)
		outageEnd        = outageAt.Add(outageFor)
		graceful, abrupt = n / 4, n * 4 / 5
		stopAt           time.Time
	)
	tick := time.NewTicker(chaosSpan / time.Duration(n))
	defer tick.Stop()
	for i := range n {
		now := time.Now()
		rc.setDown(!now.Before(outageAt) && now.Before(outageEnd))
		switch i {
		case graceful:
			ctx, done := context.WithTimeout(t.Context(), time.Second)
			if err := s.Close(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Close() = %v", err)
			}
			done()
			s, cancel = open()
		}
		var release func()
		if i == abrupt {
			release = rc.stall()
		}
		id, err := s.Send(t.Context(), chaosEvent(i))
		if err != nil {
			t.Fatalf("Send(%d) = %v", i, err)
		}
		sent[id] = time.Now()
		if i == abrupt {
			// The sender stops while an attempt of its is at the receiver,
			// which takes the event after: the next sender makes the attempt
			// again once its lease ends.
			polltest.Until(t, 10*time.Second, "an attempt at the receiver", func() bool { return rc.stalled() > 0 })
			cancel()
			stopAt = time.Now()
			release()
			s, cancel = open()
		}
		<-tick.C
	}
	rc.setDown(false)
	polltest.Until(t, 5*time.Minute, "every event taken", func() bool { return rc.taken() == n })
	var st webhook.Stats
	polltest.UntilNil(t, 5*time.Minute, "no delivery pending", func() (err error) {
		if st, err = s.Stats(t.Context()); err == nil && st.Pending > 0 {
			err = fmt.Errorf("%d pending", st.Pending)
		}
		return err
	})
	ctx, done := context.WithTimeout(t.Context(), 10*time.Second)
	defer done()
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close() = %v", err)
	}
	cancel()

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Errorf("receiver refused %d requests, first: %s", len(rc.bad), rc.bad[0])
	}
	var normal, acrossOutage, acrossStop []time.Duration
	for id, at := range sent {
		got, ok := rc.first[id]
		if !ok {
			t.Errorf("event %s never taken", id)
			continue
		}
		d := got.Sub(at)
		switch {
		case at.Before(outageEnd) && got.After(outageAt):
			acrossOutage = append(acrossOutage, d)
		case at.Before(stopAt) && got.After(stopAt):
			acrossStop = append(acrossStop, d)
		default:
			normal = append(normal, d)
		}
	}
	if len(rc.first) != n {
		t.Errorf("receiver took %d events, want %d", len(rc.first), n)
	}
	p50, p99 := sandboxtest.Quantile(normal, 0.5), sandboxtest.Quantile(normal, 0.99)
	t.Logf("events %d (real %v): requests %d + %d refused while down (%.2f attempts an event), %d answered 5xx, %d duplicates (same id and body), %d bad signatures",
		n, real, rc.requests, rc.refused, float64(rc.requests+rc.refused)/float64(n), rc.failed, rc.dups, len(rc.bad))
	t.Logf("delay Send -> taken outside the outage and the abrupt stop (%d events): p50 %v, p99 %v, max %v",
		len(normal), p50, p99, sandboxtest.Quantile(normal, 1))
	t.Logf("across the outage (%d events): p50 %v, max %v; across the abrupt stop (%d events): max %v",
		len(acrossOutage), sandboxtest.Quantile(acrossOutage, 0.5), sandboxtest.Quantile(acrossOutage, 1), len(acrossStop), sandboxtest.Quantile(acrossStop, 1))
	t.Logf("last sender: %+v", st)
	if p99 > 2*time.Second {
		t.Errorf("p99 delay outside the outage = %v, want <= 2s", p99)
	}
	// The stopped sender's attempts the receiver held: each made again by
	// the next sender.
	for _, id := range rc.held {
		if got := rc.tries[id]; got < 2 {
			t.Errorf("event %s, in flight at the abrupt stop, reached the receiver %d times, want the next sender's attempt too", id, got)
		}
	}
	if rc.dups == 0 {
		t.Errorf("no duplicate: the receiver's failures after taking an event were not retried")
	}
}
