package sandbox_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
)

// replicaDeltas is the text deltas of each benchmark turn.
const replicaDeltas = 1000

// BenchmarkReplication measures what shipping a box's events to the
// broker's replica costs a turn's delivery, and how far the replica lags
// its reader: a Claude Code turn of replicaDeltas deltas streamed from a
// box whose broker keeps a replica against the same in a box whose
// broker keeps none, so that its bridge ships nothing, on the same engine
// in the same run, alternating. shipped-events/s and plain-events/s are
// the reader's rates, events-ratio shipped over plain; lag-p50-ms and
// lag-p99-ms are, per event, the time from the reader receiving it to
// the replica holding it (negative: the replica held it first).
func BenchmarkReplication(b *testing.B) {
	f := setup(b)
	host, err := f.Vendor.HostAddress(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	const key = "bench-router-key"
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: routerstub.ScriptFunc(func(r routerstub.Request) routerstub.Reply {
		if r.Side {
			return routerstub.Text("side")
		}
		return routerstub.Deltas(strings.Repeat("replicate ", replicaDeltas), replicaDeltas)
	})})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: stub}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })
	up := []broker.Upstream{{Name: broker.Router, URL: "http://" + l.Addr().String(), Key: key, Auth: broker.AuthAsPresented}}

	var mu sync.Mutex
	held := map[string]time.Time{} // run/seq -> when the replica held it
	rep, err := replica.Open(b.Context(), b.TempDir(), replica.Options{Observe: func(_, run string, last int64) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for s := last; s > 0; s-- {
			k := run + "/" + itoa(s)
			if _, ok := held[k]; ok {
				break
			}
			held[k] = now
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rep.Close() })
	env := func(o broker.Options) *sandbox.Environment {
		lb, err := sandbox.StartBroker(b.Context(), f.Vendor, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = lb.Close() })
		p := f.Provider(b, func(so *sandbox.Options) { so.Router, so.Broker, so.BrokerURL = sandbox.Router{}, lb, lb.URL })
		e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_ = e.Destroy(ctx)
		})
		return e
	}
	shipped, plain := env(broker.Options{Upstreams: up, Replica: rep}), env(broker.Options{Upstreams: up})
	var turn func(e *sandbox.Environment, measure bool) (events int, took time.Duration)
	var lags, firstShipped, firstPlain []time.Duration
	turn = func(e *sandbox.Environment, measure bool) (events int, took time.Duration) {
		read := map[int64]time.Time{}
		var runID string
		start := time.Now()
		for ev, err := range e.Stream(b.Context(), provider.Turn{Prompt: "bench " + randText(), Timeout: 5 * time.Minute}) {
			if err != nil {
				b.Fatal(err)
			}
			if events++; events == 2 { // the first after execution.started
				if e == shipped {
					firstShipped = append(firstShipped, time.Since(start))
				} else {
					firstPlain = append(firstPlain, time.Since(start))
				}
			}
			if n := ev.Frame(); n > 0 {
				if _, ok := read[n]; !ok {
					read[n] = time.Now()
				}
			}
			if ev.RunID != "" {
				runID = ev.RunID
			}
		}
		took = time.Since(start)
		if measure {
			for seq, at := range read {
				var h time.Time
				polltest.Until(b, 30*time.Second, "the replica to hold event "+itoa(seq)+" of run "+runID, func() bool {
					mu.Lock()
					defer mu.Unlock()
					h = held[runID+"/"+itoa(seq)]
					return !h.IsZero()
				})
				lags = append(lags, h.Sub(at))
			}
		}
		return events, took
	}
	turn(shipped, false)
	turn(plain, false)
	var sn, pn int
	var st, pt time.Duration
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			n, d := turn(shipped, true)
			sn, st = sn+n, st+d
			n, d = turn(plain, false)
			pn, pt = pn+n, pt+d
		} else {
			n, d := turn(plain, false)
			pn, pt = pn+n, pt+d
			n, d = turn(shipped, true)
			sn, st = sn+n, st+d
		}
	}
	slices.Sort(lags)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// Lag is when the replica held an event less when the reader got it:
	// negative while readers get only what the replica holds (the bridge
	// holds them back, 200 ms at most); ahead counts the events a reader
	// got first.
	ahead := 0
	for _, l := range lags {
		if l > 0 {
			ahead++
		}
	}
	b.ReportMetric(ms(lags[len(lags)/2]), "lag-p50-ms")
	b.ReportMetric(ms(lags[len(lags)*99/100]), "lag-p99-ms")
	b.ReportMetric(float64(ahead), "read-ahead-events")
	slices.Sort(firstShipped)
	slices.Sort(firstPlain)
	b.ReportMetric(ms(firstShipped[len(firstShipped)/2]), "first-event-shipped-ms")
	b.ReportMetric(ms(firstPlain[len(firstPlain)/2]), "first-event-plain-ms")
	b.ReportMetric(float64(sn)/st.Seconds(), "shipped-events/s")
	b.ReportMetric(float64(pn)/pt.Seconds(), "plain-events/s")
	b.ReportMetric((float64(sn)/st.Seconds())/(float64(pn)/pt.Seconds()), "events-ratio")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
