package broker_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// The benchmark's model stream: an Anthropic Messages stream of
// benchEvents text deltas of benchEventBytes each, flushed one by one, gap
// apart (0: as fast as the upstream writes). 2,000 deltas a second is ten
// times the fastest model's token rate.
const (
	benchEvents     = 400
	benchEventBytes = 64
	benchGap        = 500 * time.Microsecond
)

// streamUpstream answers every request with the benchmark's stream:
// message_start, the deltas, message_delta with usage, message_stop.
func streamUpstream(gap time.Duration) http.Handler {
	delta := []byte(`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` +
		strings.Repeat("x", benchEventBytes) + `"}}` + "\n\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"bench-model\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n")
		fl.Flush()
		next := time.Now()
		for range benchEvents {
			if gap > 0 {
				next = next.Add(gap)
				time.Sleep(time.Until(next))
			}
			_, _ = w.Write(delta)
			fl.Flush()
		}
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":400}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		fl.Flush()
	})
}

// BenchmarkBroker measures what the broker adds to a streamed model
// answer, against the same client calling the upstream directly in the
// same run (impl=baseline), at 1 and 50 streams at once: ttfb-p50-ms is
// the time to the first byte of the answer, and events/s the deltas
// delivered per second over the whole streams (ratio boxctl/baseline in
// make bench's second table). pace=model streams 2,000 deltas a second
// (ten times a fast model's token rate); pace=raw as fast as the upstream
// writes, where on one machine the broker's own copy competes with both
// ends for the same cores.
func BenchmarkBroker(b *testing.B) {
	for _, pace := range []struct {
		name string
		gap  time.Duration
	}{{"model", benchGap}, {"raw", 0}} {
		b.Run("pace="+pace.name, func(b *testing.B) { benchBroker(b, pace.gap) })
	}
}

func benchBroker(b *testing.B, gap time.Duration) {
	up := httptest.NewServer(streamUpstream(gap))
	b.Cleanup(up.Close)
	br, err := broker.New(broker.Options{Upstreams: []broker.Upstream{{Name: broker.Router, URL: up.URL, Key: "k", Auth: broker.AuthAsPresented}}})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(br)
	b.Cleanup(front.Close)
	target, _ := url.Parse(up.URL)
	bare := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, FlushInterval: -1,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256}, ErrorLog: log.New(io.Discard, "", 0)}
	// Like the broker, it reads the request whole first (see
	// Broker.ServeHTTP: a streamed answer otherwise may end early).
	floor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		bare.ServeHTTP(w, r)
	}))
	b.Cleanup(floor.Close)
	body := `{"model":"m","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	for _, conc := range []int{1, 50} {
		tokens := make([]string, conc)
		for i := range tokens {
			if tokens[i], err = br.Grant(b.Context(), broker.Grant{Box: "box-" + strconv.Itoa(i)}); err != nil {
				b.Fatal(err)
			}
		}
		for _, impl := range []struct{ name, url string }{{"baseline", up.URL}, {"reverseproxy", floor.URL}, {"boxctl", front.URL}} {
			b.Run("conc="+strconv.Itoa(conc)+"/impl="+impl.name, func(b *testing.B) {
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2, DisableCompression: true}}
				var mu sync.Mutex
				var ttfb []time.Duration
				var events int64
				start := time.Now()
				for b.Loop() {
					var wg sync.WaitGroup
					for i := range conc {
						wg.Go(func() {
							req, _ := http.NewRequest(http.MethodPost, impl.url+"/v1/messages", strings.NewReader(body))
							req.Header.Set("X-Api-Key", tokens[i])
							t0 := time.Now()
							resp, err := client.Do(req)
							if err != nil {
								b.Error(err)
								return
							}
							defer resp.Body.Close()
							var one [1]byte
							if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
								b.Error(err)
								return
							}
							first := time.Since(t0)
							n, _ := io.Copy(io.Discard, resp.Body)
							if n < benchEvents*benchEventBytes {
								b.Errorf("a stream of %d bytes, want at least %d", n, benchEvents*benchEventBytes)
							}
							mu.Lock()
							ttfb, events = append(ttfb, first), events+benchEvents
							mu.Unlock()
						})
					}
					wg.Wait()
				}
				elapsed := time.Since(start)
				slices.Sort(ttfb)
				b.ReportMetric(float64(ttfb[len(ttfb)/2].Microseconds())/1000, "ttfb-p50-ms")
				b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
			})
		}
	}
}
