package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tangle-network/boxctl/internal/polltest"
)

// lifecycle is a box's lifecycle event as the tests send it (the fields
// of sandbox.Event's JSON).
type lifecycle struct {
	Type   string `json:"type"`
	Vendor string `json:"vendor"`
	BoxID  string `json:"boxId"`
	RunTag string `json:"runTag,omitempty"`
	Reason string `json:"reason,omitempty"`
	RunID  string `json:"runId,omitempty"`
	Usage  *usage `json:"usage,omitempty"`
}

type usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

func TestOptions_Invalid(t *testing.T) {
	secret := NewSecret()
	dir := t.TempDir()
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no path", Options{Endpoints: []Endpoint{{URL: "http://127.0.0.1/h", Secret: secret}}}, "Path is required"},
		{"no endpoint", Options{Path: filepath.Join(dir, "a.db")}, "at least one"},
		{"relative URL", Options{Path: filepath.Join(dir, "a.db"), Endpoints: []Endpoint{{URL: "/hooks", Secret: secret}}}, "absolute http"},
		{"bad secret", Options{Path: filepath.Join(dir, "a.db"), Endpoints: []Endpoint{{URL: "http://127.0.0.1/h", Secret: "hunter2-hunter2"}}}, "whsec_"},
		{"twice", Options{Path: filepath.Join(dir, "a.db"), Endpoints: []Endpoint{{URL: "http://127.0.0.1/h", Secret: secret}, {URL: "http://127.0.0.1/h", Secret: secret}}}, "given twice"},
		{"negative", Options{Path: filepath.Join(dir, "a.db"), Endpoints: []Endpoint{{URL: "http://127.0.0.1/h", Secret: secret}}, Timeout: -1}, "negative"},
		{"token in the URL stays out", Options{Endpoints: []Endpoint{{URL: "http://127.0.0.1/hooks/T0KEN", Secret: "x"}}}, "http://127.0.0.1/..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), tt.o)
			if err == nil {
				s.Close(t.Context())
				t.Fatalf("Open() = nil error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open() = %v, want %q", err, tt.want)
			}
			for _, secret := range []string{"hunter2", "T0KEN", strings.TrimPrefix(secret, "whsec_")} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("Open() = %v: quotes a secret", err)
				}
			}
		})
	}
}

// sink is an endpoint that takes every delivery, or fails them with
// status.
type sink struct {
	secret string
	mu     sync.Mutex
	status int
	got    []Message
	tries  int
	bad    []error
}

func (k *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tries++
	if err := Verify(k.secret, r.Header, body, 0); err != nil {
		k.bad = append(k.bad, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if k.status != 0 {
		w.WriteHeader(k.status)
		return
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil || m.ID != r.Header.Get(HeaderID) {
		k.bad = append(k.bad, errors.New("body: id differs from the header's"))
	}
	k.got = append(k.got, m)
}

func (k *sink) messages() []Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Message(nil), k.got...)
}

func (k *sink) attempts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tries
}

func (k *sink) set(status int) {
	k.mu.Lock()
	k.status = status
	k.mu.Unlock()
}

func TestSender_DeliversByType(t *testing.T) {
	all, destroys := &sink{secret: NewSecret()}, &sink{secret: NewSecret()}
	srvAll, srvDestroys := httptest.NewServer(all), httptest.NewServer(destroys)
	t.Cleanup(srvAll.Close)
	t.Cleanup(srvDestroys.Close)
	s, err := Open(t.Context(), Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Endpoints: []Endpoint{
		{URL: srvAll.URL + "/all", Secret: all.secret},
		{URL: srvDestroys.URL + "/destroys", Secret: destroys.secret, Types: []string{"destroyed"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	at := time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)
	events := []lifecycle{
		{Type: "created", Vendor: "docker", BoxID: "b1", RunTag: "r1"},
		{Type: "turn.ended", Vendor: "docker", BoxID: "b1", RunTag: "r1", Reason: "completed", RunID: "run1",
			Usage: &usage{Requests: 1, InputTokens: 10, OutputTokens: 5}},
		{Type: "destroyed", Vendor: "docker", BoxID: "b1", RunTag: "r1", Reason: "user"},
	}
	var want []Message
	for _, ev := range events {
		id, err := s.Send(t.Context(), Event{Type: ev.Type, Time: at, Data: ev})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(ev)
		want = append(want, Message{ID: id, Type: ev.Type, Timestamp: at, Data: data})
	}
	polltest.Until(t, 10*time.Second, "three deliveries and one", func() bool {
		return len(all.messages()) == 3 && len(destroys.messages()) == 1
	})
	byID := func(a, b Message) int { return strings.Compare(a.ID, b.ID) }
	if diff := cmp.Diff(want, all.messages(), cmpSortMessages(byID)); diff != "" {
		t.Errorf("all events endpoint got (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[2:], destroys.messages()); diff != "" {
		t.Errorf("destroyed endpoint got (-want +got):\n%s", diff)
	}
	if len(all.bad)+len(destroys.bad) > 0 {
		t.Errorf("bad deliveries: %v %v", all.bad, destroys.bad)
	}
}

func cmpSortMessages(less func(a, b Message) int) cmp.Option {
	return cmp.Transformer("sort", func(ms []Message) []Message {
		out := append([]Message(nil), ms...)
		slices.SortFunc(out, less)
		return out
	})
}

// TestSender_CloseLeavesTheRest: Close gives up at its context's end and
// the next Sender on the outbox delivers what was left.
func TestSender_CloseLeavesTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &sink{secret: NewSecret(), status: http.StatusServiceUnavailable}
		o := Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Client: &http.Client{Transport: handlerTransport{k}},
			Endpoints: []Endpoint{{URL: "http://receiver.test/hooks/T0KEN", Secret: k.secret}}}
		s, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if _, err := s.Send(t.Context(), Event{Type: "ready", Data: lifecycle{Type: "ready", BoxID: "b1"}}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		if err := s.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Flush() = %v, want %v", err, context.DeadlineExceeded)
		}
		tries := k.attempts()
		// Close makes the attempts that are due, not those waiting out
		// their back-off.
		if err := s.Close(t.Context()); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if got := k.attempts(); got > tries+5 {
			t.Errorf("Close made %d attempts, want at most the 5 due", got-tries)
		}
		if _, err := s.Send(t.Context(), Event{Type: "ready"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Send() after Close = %v, want %v", err, ErrClosed)
		}
		st, err := ReadState(t.Context(), o.Path)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].Pending != 5 || st[0].URL != "http://receiver.test/..." || st[0].LastError != "status 503" {
			t.Fatalf("ReadState() = %+v, want 5 pending to http://receiver.test/... after status 503", st)
		}

		k.set(0)
		s, err = Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(t.Context()); err != nil {
			t.Errorf("Flush() = %v", err)
		}
		if err := s.Close(t.Context()); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if got := len(k.messages()); got != 5 {
			t.Errorf("delivered after reopening: %d, want 5", got)
		}
		st, err = ReadState(t.Context(), o.Path)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].Pending != 0 || st[0].Delivered != 5 {
			t.Errorf("ReadState() = %+v, want 5 delivered", st)
		}
	})
}

// TestSender_SharedOutbox: two Senders on one outbox do not make the same
// attempt twice (the lease).
func TestSender_SharedOutbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &sink{secret: NewSecret()}
		o := Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Client: &http.Client{Transport: handlerTransport{k}},
			Endpoints: []Endpoint{{URL: "http://receiver.test/hooks", Secret: k.secret}}}
		a, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		const n = 50
		for i := range n {
			s := a
			if i%2 == 1 {
				s = b
			}
			if _, err := s.Send(t.Context(), Event{Type: "ready"}); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []*Sender{a, b} {
			if err := s.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []*Sender{a, b} {
			if err := s.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if k.tries != n || len(k.got) != n {
			t.Errorf("%d events: %d requests, %d taken; want %d each", n, k.tries, len(k.got), n)
		}
	})
}

// TestSender_Abandons: a delivery past MaxAge is given up, kept and
// counted.
func TestSender_Abandons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &sink{secret: NewSecret(), status: http.StatusInternalServerError}
		o := Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Client: &http.Client{Transport: handlerTransport{k}},
			Endpoints: []Endpoint{{URL: "http://receiver.test/hooks", Secret: k.secret}}, MaxAge: 10 * time.Second}
		s, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(t.Context(), Event{Type: "ready"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := s.abandoned.Load(); got != 1 {
			t.Errorf("abandoned = %d, want 1", got)
		}
		// Exponential: 100ms, 200ms, ... within 10s: about 7 attempts, not hundreds.
		if k.tries < 5 || k.tries > 10 {
			t.Errorf("attempts in 10s = %d, want 5..10", k.tries)
		}
		st, err := ReadState(t.Context(), o.Path)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].Abandoned != 1 || st[0].Pending != 0 {
			t.Errorf("ReadState() = %+v, want 1 abandoned", st)
		}
	})
}

func TestSender_Metrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &sink{secret: NewSecret(), status: http.StatusInternalServerError}
		o := Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Client: &http.Client{Transport: handlerTransport{k}},
			Endpoints: []Endpoint{{URL: "http://receiver.test/hooks", Secret: k.secret}}}
		s, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(t.Context())
		for range 2 {
			if _, err := s.Send(t.Context(), Event{Type: "ready"}); err != nil {
				t.Fatal(err)
			}
		}
		scrape := func() map[string]float64 {
			rec := httptest.NewRecorder()
			s.Metrics().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			parser := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := parser.TextToMetricFamilies(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for name, f := range fams {
				m := f.GetMetric()[0]
				got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
			return got
		}
		// Virtual time: the first attempts (at 0) and their first retries
		// (within 100ms) fail; the next retries are 100-200ms later.
		time.Sleep(110 * time.Millisecond)
		synctest.Wait()
		want := map[string]float64{"boxctl_webhook_attempts_total": 4, "boxctl_webhook_retries_total": 2,
			"boxctl_webhook_failed_attempts_total": 4, "boxctl_webhook_delivered_total": 0, "boxctl_webhook_abandoned_total": 0,
			"boxctl_webhook_pending": 2, "boxctl_webhook_oldest_pending_seconds": 0.11}
		if diff := cmp.Diff(want, scrape()); diff != "" {
			t.Errorf("metrics while failing (-want +got):\n%s", diff)
		}
		k.set(0)
		time.Sleep(time.Second)
		synctest.Wait()
		want = map[string]float64{"boxctl_webhook_attempts_total": 6, "boxctl_webhook_retries_total": 4,
			"boxctl_webhook_failed_attempts_total": 4, "boxctl_webhook_delivered_total": 2, "boxctl_webhook_abandoned_total": 0,
			"boxctl_webhook_pending": 0, "boxctl_webhook_oldest_pending_seconds": 0}
		if diff := cmp.Diff(want, scrape()); diff != "" {
			t.Errorf("metrics once delivered (-want +got):\n%s", diff)
		}
	})
}

// handlerTransport hands each request to a handler in this goroutine: no
// network, so virtual time (synctest) runs it.
type handlerTransport struct{ h http.Handler }

func (m handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// TestSender_CloseGivesBackLeases: the attempts Close cuts short are made
// at once by the next Sender, not after their lease.
func TestSender_CloseGivesBackLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &sink{secret: NewSecret()}
		var stall sync.Mutex
		stalled := true
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			stall.Lock()
			s := stalled
			stall.Unlock()
			if s {
				<-r.Context().Done() // an endpoint that never answers
				return
			}
			k.ServeHTTP(w, r)
		})
		o := Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Client: &http.Client{Transport: handlerTransport{h}},
			Endpoints: []Endpoint{{URL: "http://receiver.test/hooks", Secret: k.secret}}}
		s, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Send(t.Context(), Event{Type: "ready"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close() with an attempt in flight = %v, want %v", err, context.DeadlineExceeded)
		}
		stall.Lock()
		stalled = false
		stall.Unlock()
		s, err = Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(t.Context())
		ctx, cancel = context.WithTimeout(t.Context(), time.Second) // less than the lease (Timeout + 2s)
		defer cancel()
		if err := s.Flush(ctx); err != nil || len(k.messages()) != 1 {
			t.Errorf("Flush() after a Close cut an attempt = %v, %d delivered; want the delivery at once", err, len(k.messages()))
		}
	})
}

// TestSender_Prunes: a long-lived Sender drops the deliveries done more
// than Keep ago.
func TestSender_Prunes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &sink{secret: NewSecret()}
		o := Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Client: &http.Client{Transport: handlerTransport{k}},
			Endpoints: []Endpoint{{URL: "http://receiver.test/hooks", Secret: k.secret}}, Keep: 30 * time.Minute, Poll: time.Minute}
		s, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(t.Context())
		if _, err := s.Send(t.Context(), Event{Type: "ready"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		delivered := func() int {
			st, err := ReadState(t.Context(), o.Path)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range st {
				n += e.Delivered
			}
			return n
		}
		if got := delivered(); got != 1 {
			t.Fatalf("delivered kept = %d, want 1", got)
		}
		time.Sleep(pruneEvery + 2*time.Minute)
		synctest.Wait()
		if got := delivered(); got != 0 {
			t.Errorf("delivered kept after %v = %d, want 0", pruneEvery, got)
		}
	})
}

// TestSender_RecoveryBringsForward: deliveries that backed off while their
// endpoint was down go out as soon as it answers again, not at their next
// back-off step.
func TestSender_RecoveryBringsForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := &sink{secret: NewSecret(), status: http.StatusServiceUnavailable}
		o := Options{Path: filepath.Join(t.TempDir(), "webhooks.db"), Client: &http.Client{Transport: handlerTransport{k}},
			Endpoints: []Endpoint{{URL: "http://receiver.test/hooks", Secret: k.secret}}}
		s, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(t.Context())
		for range 5 {
			if _, err := s.Send(t.Context(), Event{Type: "ready"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Minute) // down long enough for back-offs at their one-minute cap
		k.set(0)
		back := time.Now()
		if _, err := s.Send(t.Context(), Event{Type: "destroyed"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(back); took > 5*time.Second {
			t.Errorf("the backed-off deliveries went out %v after the endpoint came back, want within 5s", took)
		}
		if got := len(k.messages()); got != 6 {
			t.Errorf("delivered %d, want 6", got)
		}
	})
}
