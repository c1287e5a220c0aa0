package store

import (
	"context"
	"fmt"
	"testing"
)

// eventPayload is a typical text-delta chunk.
var eventPayload = []byte(`{"id":"chatcmpl-run","object":"chat.completion.chunk","created":1700000000,"model":"claude-code/sonnet","choices":[{"index":0,"delta":{"content":"Hello, world. "},"finish_reason":null}]}`)

// BenchmarkStoreAppend measures durable appends (WAL, synchronous FULL):
// one transaction per batch; events/s is the figure to compare.
func BenchmarkStoreAppend(b *testing.B) {
	for _, batch := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, b.TempDir(), Options{MaxEvents: 1 << 40, MaxBytes: 1 << 50})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, _, err := s.CreateRun(ctx, Run{ID: "r", Digest: "d", Harness: "h", Model: "m"}); err != nil {
				b.Fatal(err)
			}
			evs := make([][]byte, batch)
			for i := range evs {
				evs[i] = eventPayload
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Append(ctx, "r", evs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkReplay measures reading a stored run back in pages of 256.
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.CreateRun(ctx, Run{ID: "r", Digest: "d", Harness: "h", Model: "m"}); err != nil {
		b.Fatal(err)
	}
	const n = 10000
	evs := make([][]byte, 500)
	for i := range evs {
		evs[i] = eventPayload
	}
	for i := 0; i < n/len(evs); i++ {
		if _, err := s.Append(ctx, "r", evs); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	total := 0
	for i := 0; i < b.N; i++ {
		var after int64
		for {
			page, err := s.Events(ctx, "r", after, 256)
			if err != nil {
				b.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			total += len(page)
			after = page[len(page)-1].Seq
		}
	}
	if total != b.N*n {
		b.Fatalf("replayed %d events, want %d", total, b.N*n)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
}
