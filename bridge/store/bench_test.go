package store

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
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

// BenchmarkPrune measures one Prune that forgets 10,000 runs past their
// identity, each with two interactions and an interaction operation, in
// batches of DefaultPruneBatch.
func BenchmarkPrune(b *testing.B) {
	ctx := context.Background()
	t0 := time.UnixMilli(1_700_000_000_000)
	clk := &clock{t: t0}
	s, err := Open(ctx, b.TempDir(), Options{Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 10000
	fill := func() {
		err := s.tx(ctx, func(tx *sql.Tx) error {
			for i := range n {
				id := fmt.Sprintf("run-%05d", i)
				if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, digest, harness, model, status, started_at, ended_at,
					replay_expires_at, replay_expired, identity_expires_at, last_seq, first_seq)
					VALUES (?, 'd', 'claude-code', 'm', 'done', ?, ?, ?, 1, ?, 40, 41)`,
					id, ms(t0), ms(t0), ms(t0.Add(DefaultReplayTTL)), ms(t0.Add(DefaultIdentityTTL))); err != nil {
					return err
				}
				for _, iid := range []string{"i1", "i2"} {
					if _, err := tx.ExecContext(ctx, `INSERT INTO interactions (run_id, id, native_id, request, status, created_at)
						VALUES (?, ?, 'n', '{}', 'resolved', ?)`, id, iid, ms(t0)); err != nil {
						return err
					}
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO interaction_ops (operation_id, run_id, interaction_id, http_status, body, created_at)
					VALUES (?, ?, 'i1', 200, '{}', ?)`, "op-"+id, id, ms(t0)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	clk.Add(DefaultIdentityTTL + time.Second)
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		st, err := s.Prune(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if st.Runs != n || st.Interactions != 2*n || st.InteractionOps != n {
			b.Fatalf("Prune = %+v, want %d runs with their interactions", st, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "runs/s")
	// Each batch is one write transaction: the longest a prune makes a
	// writer wait.
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*n/DefaultPruneBatch), "ms/batch")
}
