package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// BenchmarkEgressTurn measures what an egress policy costs a turn: the
// time to the first event of a Claude Code turn in a box under
// default-deny (its model traffic through the broker, everything else
// refused outside the box) against the same in an open box, both on the
// same engine in the same run. The boxes are made once and each runs one
// turn untimed (the harness's first start); each op then runs pairs of
// turns, one in each box, the order alternating. It reports the mean
// deny-ttfe-ms and open-ttfe-ms of a turn and their ttfe-ratio
// (deny/open), on Docker (the gate's kernel rules) and Kubernetes (a
// NetworkPolicy, and the relay).
func BenchmarkEgressTurn(b *testing.B) {
	for _, target := range []string{"docker", "kubernetes"} {
		b.Run("vendor="+target, func(b *testing.B) { egressTurn(b, newEgressRigOn(b, target)) })
	}
}

func egressTurn(b *testing.B, r *egressRig) {
	mk := func(policy string) *sandbox.Environment {
		p := r.provider(b, policy)
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
	deny, open := mk(""), mk("open")
	ttfe := func(e *sandbox.Environment) time.Duration {
		start := time.Now()
		var first time.Duration
		for _, err := range e.Stream(b.Context(), provider.Turn{Prompt: "bench " + randText(), Timeout: 2 * time.Minute}) {
			if err != nil {
				b.Fatal(err)
			}
			if first == 0 {
				first = time.Since(start)
			}
		}
		return first
	}
	ttfe(deny)
	ttfe(open)
	const pairs = 4
	var d, o time.Duration
	for b.Loop() {
		for i := range pairs {
			if i%2 == 0 {
				d += ttfe(deny)
				o += ttfe(open)
			} else {
				o += ttfe(open)
				d += ttfe(deny)
			}
		}
	}
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 / float64(b.N*pairs) }
	b.ReportMetric(ms(d), "deny-ttfe-ms")
	b.ReportMetric(ms(o), "open-ttfe-ms")
	b.ReportMetric(ms(d)/ms(o), "ttfe-ratio")
}
