package bridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// restartEnv is the environment of the box-bridge processes the restart
// benchmark starts: fakeclaude as the claude backend, info logs.
func restartEnv(b *testing.B) []string {
	return append(os.Environ(), "BRIDGE_LOG_LEVEL=info", "CLAUDE_BIN="+bridgetest.FakeClaude(b),
		"TANGLE_API_KEY=rk-bench-key", "TANGLE_ROUTER_URL=http://127.0.0.1:9")
}

// BenchmarkRestart measures the bridge's restart after a crash: the
// box-bridge binary is killed with SIGKILL while a run is live (its
// harness printing), on a data directory that also holds a finished turn
// of 10,000 deltas, and started again on it. restart-ms is the time from
// starting the process to the first 200 from GET /health (polled every
// millisecond), recovered-ms the time to the answer of GET /v1/runs/:id
// that reads the interrupted run terminal; exec-ms is
// the same binary's start and exit with -version, the floor of any
// start. Target: half the restart time of the bridge before this
// benchmark's changes.
func BenchmarkRestart(b *testing.B) {
	data := b.TempDir()
	env := restartEnv(b)
	ctx := context.Background()
	// start starts the bridge and returns how long it took to answer
	// /health and to serve the run the last crash interrupted (live,
	// when there is one) as terminal.
	start := func(live string) (p *bridgeProc, health, served time.Duration) {
		t0 := time.Now()
		p = &bridgeProc{boxbridgetest.Start(b, boxbridgetest.Options{Env: env, Bearer: procBearer, DataDir: data, Poll: time.Millisecond})}
		health = time.Since(t0)
		if live != "" {
			resp, err := benchRequest(ctx, p.URL, "GET", "/v1/runs/"+live, "")
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			served = time.Since(t0)
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"terminal":true`)) {
				b.Fatalf("GET /v1/runs/%s after the restart = %d %s, want it terminal", live, resp.StatusCode, body)
			}
		}
		return p, health, served
	}
	p, _, _ := start("")
	bb := &benchBridge{url: p.URL}
	if _, err := bb.streamTurn(ctx, "restart-long", "many:"+strconv.Itoa(benchDeltas)); err != nil {
		b.Fatal(err)
	}
	// crash leaves a live run behind and kills the bridge.
	crash := func(p *bridgeProc, i int) string {
		id := fmt.Sprintf("restart-live-%d", i)
		body := fmt.Sprintf(`{"model":"claude-code","stream":true,"run_id":%q,"messages":[{"role":"user","content":"slow:100000:10"}]}`, id)
		resp, err := benchRequest(ctx, p.URL, "POST", "/v1/chat/completions", body)
		if err != nil {
			b.Fatal(err)
		}
		// The run is live once its first delta arrived.
		if n, _ := readFramesN(resp.Body, 1); n != 1 {
			b.Fatalf("live run: %d frames before the crash", n)
		}
		p.Kill()
		resp.Body.Close()
		return id
	}
	live := crash(p, -1)
	bin := boxbridgetest.Build(b)
	var health, served, floor time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, h, s := start(live)
		health, served = health+h, served+s
		b.StopTimer()
		live = crash(p, i)
		t0 := time.Now()
		if out, err := exec.Command(bin, "-version").CombinedOutput(); err != nil {
			b.Fatalf("box-bridge -version: %v: %s", err, out)
		}
		floor += time.Since(t0)
		b.StartTimer()
	}
	b.StopTimer()
	// The last crash's run is recovered, so that no harness outlives the
	// benchmark.
	last, _, _ := start(live)
	last.Kill()
	b.ReportMetric(float64(health.Microseconds())/1e3/float64(b.N), "restart-ms")
	b.ReportMetric(float64(served.Microseconds())/1e3/float64(b.N), "recovered-ms")
	b.ReportMetric(float64(floor.Microseconds())/1e3/float64(b.N), "exec-ms")
}

// readFramesN reads an SSE stream until n data frames arrived or it
// ended, and returns how many arrived.
func readFramesN(r io.Reader, n int) (int, error) {
	br := bufio.NewReader(r)
	got := 0
	for got < n {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data: ")) {
			got++
		}
		if err != nil && err != bufio.ErrBufferFull {
			return got, err
		}
	}
	return got, nil
}
