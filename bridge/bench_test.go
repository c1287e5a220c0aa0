package bridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/internal/pipe"
	"github.com/tangle-network/boxctl/bridge/server"
	"github.com/tangle-network/boxctl/bridge/store"
)

// benchDeltas is the number of text deltas of the benchmark turn.
const benchDeltas = 10000

// benchBridge is an in-process bridge (store, engine, HTTP server on a
// loopback port) running the scripted harness.
type benchBridge struct {
	url  string
	st   *store.Store
	data string // the data directory
}

func newBenchBridge(b *testing.B) *benchBridge {
	b.Helper()
	data := b.TempDir()
	// Retention is raised so that a reader of the whole turn never falls
	// behind the window and the stored turn stays replayable for the
	// whole benchmark.
	st, err := store.Open(context.Background(), data, store.Options{MaxEvents: 1 << 20, ReplayTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	eng, err := engine.New(context.Background(), st, engine.Options{DataDir: data, RouterURL: "http://127.0.0.1:9", RouterKey: "rk-bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Close(ctx)
	})
	srv, err := server.New(server.Options{Engine: eng, Bearer: procBearer,
		Backends: []*engine.Backend{{Adapter: claude.Adapter{}, Bin: bridgetest.FakeClaude(b)}}})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	return &benchBridge{url: hs.URL, st: st, data: data}
}

func benchRequest(ctx context.Context, url, method, path, body string, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+procBearer)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return http.DefaultClient.Do(req)
}

// countFrames reads an SSE stream to its end and counts its data frames
// (not [DONE]); it fails on an error frame (data that is an error
// object, wire.ErrorResponse) and unless the stream ended with [DONE].
// It looks at the start of each frame only, so that it costs little
// beside the bridge it measures.
func countFrames(r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: ")) {
			if bytes.Equal(line, []byte("data: [DONE]\n")) {
				return n, nil
			}
			if bytes.HasPrefix(line, []byte(`data: {"error":`)) {
				return n, fmt.Errorf("error frame: %s", line)
			}
			n++
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("stream ended without [DONE] after %d frames: %w", n, err)
		}
	}
}

// streamTurn runs one streaming turn and returns its frame count.
func (bb *benchBridge) streamTurn(ctx context.Context, runID, prompt string) (int, error) {
	body := fmt.Sprintf(`{"model":"claude-code","stream":true,"run_id":%q,"messages":[{"role":"user","content":%q}]}`, runID, prompt)
	resp, err := benchRequest(ctx, bb.url, "POST", "/v1/chat/completions", body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("POST = %d", resp.StatusCode)
	}
	return countFrames(resp.Body)
}

// BenchmarkDelivery runs turns of 10,000 text deltas from the scripted
// harness. Each op runs three turns, alternating so that the shared
// machine's noise falls on all alike: one with the harness's stdout pipe
// read by a plain reader (the raw pipe rate, the baseline); one read as
// the bridge reads it, with nothing parsed or kept (the window baseline,
// see newPipeTurn); and one delivered through the bridge (parse, commit,
// HTTP) to one SSE reader.
//
// pipe-ratio is the bridge's rate over the raw pipe's, window-ratio its
// rate over the window baseline's (what the bridge's own work costs),
// allocs/event the heap allocations of this process (bridge and reader)
// per delivered event, cpu-ns/event its CPU time per event. The
// harness's CPU time per event is harness-cpu-ns/event when the bridge
// reads it and pipe-cpu-ns/event when the plain reader does: a reader
// that is woken by every line costs the harness a wake-up per line. CPU
// time is what the machine's other load changes least. writes/turn and
// reads/turn count the store's write transactions and event reads.
// Target:
// pipe-ratio at least 0.8 at no more than 2 allocs/event.
func BenchmarkDelivery(b *testing.B) {
	prompt := "many:" + strconv.Itoa(benchDeltas)
	bb := newBenchBridge(b)
	plain, windowed := newPipeTurn(b, prompt, false), newPipeTurn(b, prompt, true)
	ctx := context.Background()
	var piped, inWindows, delivered, cpu, pipeCPU, harnessCPU time.Duration
	var allocs uint64
	st0 := bb.st.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0 := cpuTime(syscall.RUSAGE_CHILDREN)
		piped += plain()
		pipeCPU += cpuTime(syscall.RUSAGE_CHILDREN) - c0
		inWindows += windowed()
		a0, c0, h0, t0 := heapAllocs(), cpuTime(syscall.RUSAGE_SELF), cpuTime(syscall.RUSAGE_CHILDREN), time.Now()
		n, err := bb.streamTurn(ctx, "deliver-"+strconv.Itoa(i), prompt)
		delivered += time.Since(t0)
		cpu += cpuTime(syscall.RUSAGE_SELF) - c0
		harnessCPU += cpuTime(syscall.RUSAGE_CHILDREN) - h0
		allocs += heapAllocs() - a0
		if err != nil {
			b.Fatal(err)
		}
		if n != benchDeltas+1 {
			b.Fatalf("frames = %d, want %d deltas and the terminal chunk", n, benchDeltas+1)
		}
	}
	events := float64(benchDeltas * b.N)
	st := bb.st.Stats()
	b.ReportMetric(float64(st.Write.Count-st0.Write.Count)/float64(b.N), "writes/turn")
	b.ReportMetric(float64(st.Read.Count-st0.Read.Count)/float64(b.N), "reads/turn")
	b.ReportMetric(events/delivered.Seconds(), "events/s")
	b.ReportMetric(events/piped.Seconds(), "pipe-events/s")
	b.ReportMetric(piped.Seconds()/delivered.Seconds(), "pipe-ratio")
	b.ReportMetric(inWindows.Seconds()/delivered.Seconds(), "window-ratio")
	b.ReportMetric(float64(allocs)/events, "allocs/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/events, "cpu-ns/event")
	b.ReportMetric(float64(pipeCPU.Nanoseconds())/events, "pipe-cpu-ns/event")
	b.ReportMetric(float64(harnessCPU.Nanoseconds())/events, "harness-cpu-ns/event")
}

// cpuTime is the user and system CPU time of who (RUSAGE_SELF: this
// process; RUSAGE_CHILDREN: its children that ended).
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAllocs is the number of heap allocations this process made so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// newPipeTurn returns a function that runs the scripted harness's turn of
// prompt with its stdout pipe read to the end by a plain reader (no
// parsing, nothing kept): the raw pipe rate a delivery benchmark compares
// itself with. It returns how long the turn took, from the start of the
// process to its exit with all its output read.
//
// The plain reader is os/exec's stdout pipe, read as soon as anything is
// in it. With windowed set it reads as the bridge does instead
// (pipe.Reader, reads engine.ReadWindow apart during a burst), which
// leaves the bridge's own work (parse, commit, HTTP) as the difference.
func newPipeTurn(b *testing.B, prompt string, windowed bool) func() time.Duration {
	bin := bridgetest.FakeClaude(b)
	buf := make([]byte, 64<<10)
	return func() time.Duration {
		t0 := time.Now()
		cmd := exec.Command(bin, "-p", "--output-format", "stream-json", "--verbose", prompt)
		var out io.ReadCloser
		if windowed {
			r, w, err := pipe.Open()
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			cmd.Stdout, out = w, r
			err = cmd.Start()
			w.Close() // the child's now
			if err != nil {
				b.Fatal(err)
			}
		} else {
			var err error
			if out, err = cmd.StdoutPipe(); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
		}
		n := 0
		var read time.Time
		for {
			if wait := engine.ReadWindow - time.Since(read); windowed && wait > 0 {
				time.Sleep(wait)
			}
			k, err := out.Read(buf)
			n, read = n+k, time.Now()
			if err != nil {
				break
			}
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatal("the harness printed nothing")
		}
		return time.Since(t0)
	}
}

// vmRSS reads a process's resident set size in MB (10^6 bytes, the unit
// benchstat reads from a "-MB" metric).
func vmRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %w", v, err)
			}
			return float64(kb) * 1024 / 1e6, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// BenchmarkRSS runs the real box-bridge binary and reads its resident set
// idle (listening, one health probe answered) and after 200 turns of the
// scripted harness, four at a time. Target: idle under 30 MB.
func BenchmarkRSS(b *testing.B) {
	const runs, workers = 200, 4
	var idle, after float64
	for i := 0; i < b.N; i++ {
		p := startBridge(b, b.TempDir())
		ctx := context.Background()
		resp, err := benchRequest(ctx, p.URL, "GET", "/health", "")
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		time.Sleep(200 * time.Millisecond)
		if idle, err = vmRSS(p.PID()); err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := w; j < runs; j += workers {
					body := fmt.Sprintf(`{"model":"claude-code","run_id":"rss-%d","messages":[{"role":"user","content":"hello"}]}`, j)
					resp, err := benchRequest(ctx, p.URL, "POST", "/v1/chat/completions", body)
					if err != nil {
						errs <- err
						return
					}
					data, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || bytes.Contains(data, []byte(`"error":{`)) {
						errs <- fmt.Errorf("turn %d = %d %s", j, resp.StatusCode, data)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		if after, err = vmRSS(p.PID()); err != nil {
			b.Fatal(err)
		}
		p.Signal(syscall.SIGTERM)
		p.Wait()
	}
	b.ReportMetric(idle, "rss-idle-MB")
	b.ReportMetric(after, "rss-200runs-MB")
}
