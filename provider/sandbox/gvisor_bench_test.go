package sandbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// filesCommand is a file-heavy tool call: a copy of npm's own tree (about
// 2,500 files), a walk of it and its removal.
const filesCommand = `cp -a "$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")" /tmp/files-bench && ` +
	`find /tmp/files-bench -type f | wc -l && rm -rf /tmp/files-bench`

// BenchmarkGVisor measures what gVisor costs a box against runc, on the
// same engine, image and model endpoint, both runtimes in every iteration
// so that the ratio compares the same moment of the machine: a create to a
// ready bridge (op=create), a claim of a standby box (op=claim), the time
// from a turn request to its first event on a ready box (op=first-event),
// and a file-heavy tool call (op=files, filesCommand). Each reports the
// mean of its iterations per runtime, in ms, and gvisor/runc.
func BenchmarkGVisor(b *testing.B) {
	f := setup(b)
	env := testbed.RequireGVisor(b)
	gv, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(testNetwork),
		docker.WithRuntime(vendors.RuntimeGVisor), docker.WithGVisorRuntime(env.GVisorRuntime))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gv.Close() })
	runtimes := []struct {
		name string
		p    *sandbox.Provider
	}{{"runc", f.Provider(b, nil)}, {"gvisor", f.On(b, target{Name: "docker-gvisor", Vendor: gv, Image: f.Image}, nil)}}

	// each runs op once per runtime in every iteration, the first runtime
	// first in even iterations and last in odd ones (a turn's tail or a
	// removal still running costs the next op alike), and reports the
	// means and their ratio.
	each := func(b *testing.B, op func(b *testing.B, p *sandbox.Provider) time.Duration) {
		sum := make([]time.Duration, len(runtimes))
		for n := 0; b.Loop(); n++ {
			for k := range runtimes {
				i := k
				if n%2 == 1 {
					i = len(runtimes) - 1 - k
				}
				sum[i] += op(b, runtimes[i].p)
			}
		}
		n := float64(b.N)
		for i, rt := range runtimes {
			b.ReportMetric(float64(sum[i].Milliseconds())/n, rt.name+"-ms")
		}
		b.ReportMetric(float64(sum[1])/float64(sum[0]), "gvisor/runc")
	}
	ready := func(b *testing.B, p *sandbox.Provider) *sandbox.Environment {
		e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = e.Destroy(context.WithoutCancel(b.Context())) })
		return e
	}
	b.Run("op=create", func(b *testing.B) {
		each(b, func(b *testing.B, p *sandbox.Provider) time.Duration {
			start := time.Now()
			e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			if err := e.Destroy(context.WithoutCancel(b.Context())); err != nil {
				b.Fatal(err)
			}
			return d
		})
	})
	b.Run("op=claim", func(b *testing.B) {
		each(b, func(b *testing.B, p *sandbox.Provider) time.Duration {
			rec, err := p.Standby(b.Context(), sandbox.StandbySpec{Harness: claude.Harness, Pool: "bench", MaxAge: 5 * time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			e, err := p.Claim(b.Context(), rec, sandbox.CreateRequest{Profile: claude, Lifetime: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			if err := e.Destroy(context.WithoutCancel(b.Context())); err != nil {
				b.Fatal(err)
			}
			return d
		})
	})
	b.Run("op=first-event", func(b *testing.B) {
		envs := map[*sandbox.Provider]*sandbox.Environment{}
		for _, rt := range runtimes {
			envs[rt.p] = ready(b, rt.p)
		}
		n := 0
		each(b, func(b *testing.B, p *sandbox.Provider) time.Duration {
			n++
			start := time.Now()
			var first time.Duration
			for _, err := range envs[p].Stream(b.Context(), provider.Turn{Prompt: fmt.Sprintf("bench %d", n)}) {
				if err != nil {
					b.Fatal(err)
				}
				if first == 0 {
					first = time.Since(start) // the rest of the turn is read, not timed
				}
			}
			if first == 0 {
				b.Fatal("the turn ended without an event")
			}
			return first
		})
	})
	b.Run("op=files", func(b *testing.B) {
		envs := map[*sandbox.Provider]*sandbox.Environment{}
		for _, rt := range runtimes {
			envs[rt.p] = ready(b, rt.p)
		}
		each(b, func(b *testing.B, p *sandbox.Provider) time.Duration {
			start := time.Now()
			res, err := envs[p].Box().Exec(b.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", filesCommand}})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("file-heavy command: %v, exit %d: %s", err, res.ExitCode, res.Stderr)
			}
			return time.Since(start)
		})
	})
}
