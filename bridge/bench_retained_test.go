package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readCanonical reads a canonical SSE stream up to its terminal status
// event and returns the number of its part updates and the text their
// deltas add up to; it fails unless the turn completed.
func readCanonical(r io.Reader) (n int, text string, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var b strings.Builder
	event := ""
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return n, "", fmt.Errorf("a frame longer than %d bytes", br.Size())
		}
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(bytes.TrimSpace(line[7:]))
		case event == "message.part.updated" && bytes.HasPrefix(line, []byte("data: ")):
			var env struct {
				Event struct {
					Delta string `json:"delta"`
				} `json:"event"`
			}
			if err := json.Unmarshal(line[6:], &env); err != nil {
				return n, "", err
			}
			n++
			b.WriteString(env.Event.Delta)
		case event == "status" && bytes.HasPrefix(line, []byte("data: ")):
			switch {
			case bytes.Contains(line, []byte(`"status":"completed"`)):
				return n, b.String(), nil
			case bytes.Contains(line, []byte(`"status":"failed"`)), bytes.Contains(line, []byte(`"status":"cancelled"`)):
				return n, "", fmt.Errorf("the turn did not complete: %s", line)
			}
		case event == "error" && bytes.HasPrefix(line, []byte("data: ")):
			return n, "", fmt.Errorf("error frame: %s", line)
		}
		if err != nil {
			return n, "", fmt.Errorf("stream ended without a terminal status after %d updates: %w", n, err)
		}
	}
}

// BenchmarkRetainedDelivery runs retained turns of 10,000 text deltas
// from the scripted harness. Each op runs one turn of the harness with
// its stdout pipe read by a plain reader (the baseline, see newPipeTurn)
// and admits one as a turn of one retained
// session (served by the session's long-lived process), read as canonical
// envelopes from GET /v1/runs/:id/events and checked to add up to the
// harness's text; the two alternate, as in BenchmarkDelivery. It reports
// the part updates a turn took (deltas that arrive together go out as one
// update) and pipe-ratio, the bridge's rate over the pipe's.
func BenchmarkRetainedDelivery(b *testing.B) {
	prompt := "many:" + strconv.Itoa(benchDeltas)
	pipe := newPipeTurn(b, prompt, false)
	var piped, delivered time.Duration
	bb := newBenchBridge(b)
	ctx := context.Background()
	resp, err := benchRequest(ctx, bb.url, "POST", "/v1/sessions", `{"id":"bench","model":"claude-code"}`)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		b.Fatalf("POST /v1/sessions = %d", resp.StatusCode)
	}
	var want strings.Builder
	for i := range benchDeltas {
		fmt.Fprintf(&want, "d%d ", i)
	}
	updates := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		piped += pipe()
		t0 := time.Now()
		run := "bench-run-" + strconv.Itoa(i)
		body := fmt.Sprintf(`{"message":%q,"turn_id":"t-%d","execution_id":"x-%d","run_id":%q}`, prompt, i, i, run)
		resp, err := benchRequest(ctx, bb.url, "POST", "/v1/sessions/bench/turns", body)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 202 {
			b.Fatalf("POST turn = %d", resp.StatusCode)
		}
		resp, err = benchRequest(ctx, bb.url, "GET", "/v1/runs/"+run+"/events", "")
		if err != nil {
			b.Fatal(err)
		}
		n, text, err := readCanonical(resp.Body)
		resp.Body.Close()
		if err != nil || text != want.String() {
			b.Fatalf("turn %d: %d updates adding up to %d bytes (%v), want the %d bytes of the harness's deltas", i, n, len(text), err, want.Len())
		}
		delivered += time.Since(t0)
		updates += n
	}
	b.ReportMetric(float64(benchDeltas*b.N)/delivered.Seconds(), "events/s")
	b.ReportMetric(float64(updates)/float64(b.N), "updates/turn")
	b.ReportMetric(piped.Seconds()/delivered.Seconds(), "pipe-ratio")
}
