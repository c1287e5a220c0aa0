package sandbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// BenchmarkSuspendResume measures a suspend and a resume to a ready
// environment of a Claude Code box that ran a turn, on Docker: through
// the sandbox provider (impl=boxctl: Suspend stops the bridge, then the
// box; Resume starts the box, a bridge with a fresh bearer, waits for its
// backend, checks the pin and attaches the environment) against a bare
// container of the same image with the bridge on its command line
// (impl=baseline: docker stop, and docker start polled until /health
// answers 200). The other half of each cycle is not timed. The same
// cycle runs on Kubernetes (vendor=kubernetes: the box's Sandbox
// Suspended and Running again, its volume kept), against the absolute target.
func BenchmarkSuspendResume(b *testing.B) {
	f := setup(b)
	env := testbed.Require(b)
	b.Run("op=suspend/impl=baseline", func(b *testing.B) { bareCycle(b, f, env, true) })
	b.Run("op=resume/impl=baseline", func(b *testing.B) { bareCycle(b, f, env, false) })
	b.Run("op=suspend/impl=boxctl", func(b *testing.B) { boxCycle(b, f, f.Docker(), true) })
	b.Run("op=resume/impl=boxctl", func(b *testing.B) { boxCycle(b, f, f.Docker(), false) })
	b.Run("op=suspend/vendor=kubernetes/impl=boxctl", func(b *testing.B) { boxCycle(b, f, sandboxtest.KubernetesTarget(b, f), true) })
	b.Run("op=resume/vendor=kubernetes/impl=boxctl", func(b *testing.B) { boxCycle(b, f, sandboxtest.KubernetesTarget(b, f), false) })
}

func bareCycle(b *testing.B, f *fixture, env testbed.Env, timeStop bool) {
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	id, url := bareRun(b, cli, f)
	defer func() { _ = cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true}) }()
	waitHealthy(b, url)
	ctx := b.Context()
	grace := 5
	var lat []time.Duration
	for b.Loop() {
		if !timeStop {
			b.StopTimer()
		}
		start := time.Now()
		if err := cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &grace}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if timeStop {
			lat = append(lat, time.Since(start))
		} else {
			b.StartTimer()
		}
		start = time.Now()
		if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			b.Fatal(err)
		}
		c, err := cli.ContainerInspect(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		waitHealthy(b, "http://127.0.0.1:"+c.NetworkSettings.Ports["3344/tcp"][0].HostPort)
		if timeStop {
			b.StopTimer()
		} else {
			lat = append(lat, time.Since(start))
		}
		b.StartTimer()
	}
	vendortest.ReportLatency(b, lat)
}

func boxCycle(b *testing.B, f *fixture, tg target, timeSuspend bool) {
	p := f.On(b, tg, suspendable(f, &events{}, nil))
	e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Destroy(context.Background()) }()
	if _, _, err := sandboxtest.Turn(b.Context(), e, provider.Turn{Prompt: "bench turn"}); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		if !timeSuspend {
			b.StopTimer()
		}
		start := time.Now()
		ref, err := e.Suspend(b.Context(), sandbox.SuspendOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if timeSuspend {
			lat = append(lat, time.Since(start))
			b.StopTimer()
		} else {
			b.StartTimer()
		}
		start = time.Now()
		if e, err = p.Resume(b.Context(), ref); err != nil {
			b.Fatal(err)
		}
		if timeSuspend {
			b.StartTimer()
		} else {
			lat = append(lat, time.Since(start))
		}
	}
	vendortest.ReportLatency(b, lat)
}

// BenchmarkFork10 measures a fork of a suspended Claude Code box into 10
// ready environments on Docker (impl=boxctl: commit the disk, create 10
// boxes of it, resume each with its own bridge and bearer) against 10
// cold creates through the provider, in parallel (impl=baseline), and the
// same fork on E2B's emulator (vendor=e2b/impl=boxctl: a snapshot of the
// source, 10 sandboxes of it, each paused, then resumed with its own
// bridge and bearer). Destroying the boxes is not timed.
func BenchmarkFork10(b *testing.B) {
	const n = 10
	f := setup(b)
	b.Run("impl=baseline", func(b *testing.B) {
		p := f.Provider(b, nil)
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			envs := make(chan *sandbox.Environment, n)
			errs := make(chan error, n)
			for range n {
				go func() {
					e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
					envs <- e
					errs <- err
				}()
			}
			var all []*sandbox.Environment
			var first error
			for range n {
				all = append(all, <-envs)
				if err := <-errs; err != nil && first == nil {
					first = err
				}
			}
			b.StopTimer()
			lat = append(lat, time.Since(start))
			for _, e := range all {
				if e != nil {
					_ = e.Destroy(context.Background())
				}
			}
			if first != nil {
				b.Fatal(first)
			}
			b.StartTimer()
		}
		vendortest.ReportLatency(b, lat)
	})
	b.Run("impl=boxctl", func(b *testing.B) { forkBench(b, f, f.Docker(), n) })
	b.Run("vendor=e2b/impl=boxctl", func(b *testing.B) { forkBench(b, f, sandboxtest.E2BTarget(b, f), n) })
	b.Run("vendor=kubernetes/impl=boxctl", func(b *testing.B) { forkBench(b, f, sandboxtest.KubernetesTarget(b, f), n) })
}

// forkBench times p.Fork of a suspended box that ran a turn into n ready
// environments on tg.
func forkBench(b *testing.B, f *fixture, tg target, n int) {
	p := f.On(b, tg, suspendable(f, &events{}, nil))
	e, err := p.Create(b.Context(), sandbox.CreateRequest{Profile: claude})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Destroy(context.Background()) }()
	if _, _, err := sandboxtest.Turn(b.Context(), e, provider.Turn{Prompt: "fork bench turn"}); err != nil {
		b.Fatal(err)
	}
	ref, err := e.Suspend(b.Context(), sandbox.SuspendOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		forks, err := p.Fork(b.Context(), ref, n)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		lat = append(lat, time.Since(start))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		for _, fe := range forks {
			_ = fe.Destroy(ctx)
		}
		cancel()
		b.StartTimer()
	}
	vendortest.ReportLatency(b, lat)
}
