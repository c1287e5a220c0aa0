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
// from the scripted harness: impl=baseline pipes the harness to /dev/null,
// impl=boxctl admits each as a turn of one retained session (served by
// the session's long-lived process) and reads it as canonical envelopes
// from GET /v1/runs/:id/events, checking that the deltas add up to the
// harness's text. It reports the part updates a turn took (deltas that
// arrive together go out as one update). Target: boxctl at least 25% of
// baseline.
func BenchmarkRetainedDelivery(b *testing.B) {
	prompt := "many:" + strconv.Itoa(benchDeltas)
	b.Run("impl=baseline", func(b *testing.B) { pipeBaseline(b, prompt) })
	b.Run("impl=boxctl", func(b *testing.B) {
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
			updates += n
		}
		b.ReportMetric(float64(benchDeltas*b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(updates)/float64(b.N), "updates/turn")
	})
}
