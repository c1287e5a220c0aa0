package docker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/reaper"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// gvisorVendor is the test bed's engine with gVisor registered under the
// name the test bed gave it.
func gvisorVendor(t *testing.T) (*Vendor, string) {
	t.Helper()
	env := testbed.RequireGVisor(t)
	_, img := newVendor(t)
	v, err := New(WithHost(env.DockerHost), WithNetwork("boxctl-test"), WithGVisorRuntime(env.GVisorRuntime))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, img
}

// TestVendor_GVisor runs a box under gVisor: its own kernel, the same
// hardening as a runc box, and bubblewrap's filesystem jail; a network
// namespace of bwrap's own cannot be brought up there, which the bridge's
// capabilities report.
func TestVendor_GVisor(t *testing.T) {
	t.Parallel()
	v, img := gvisorVendor(t)
	box := create(t, v, vendors.CreateSpec{Image: img, Runtime: vendors.RuntimeGVisor})
	c, err := v.cli.ContainerInspect(t.Context(), box.ID())
	if err != nil {
		t.Fatal(err)
	}
	if c.HostConfig.Runtime != v.opts.gvisor {
		t.Errorf("runtime = %q, want %q", c.HostConfig.Runtime, v.opts.gvisor)
	}
	res := exec1(t, box, "sh", "-c", "uname -r; id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
	got := strings.Fields(string(res.Stdout))
	if len(got) != 6 || !strings.Contains(got[0], "gvisor") || got[1] != "10001" || got[3] != "0000000000000000" || got[5] != "1" {
		t.Errorf("box under gVisor: %q, want gVisor's kernel, uid 10001, no capabilities, no new privileges", res.Stdout)
	}
	shared := slices.DeleteFunc(slices.Clone(jailProbe), func(a string) bool { return a == "--unshare-net" })
	if res := exec1(t, box, shared...); res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "bwrap" {
		t.Errorf("bwrap's filesystem jail under gVisor: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := exec1(t, box, jailProbe...); res.ExitCode == 0 {
		t.Errorf("bwrap --unshare-net under gVisor succeeded: the bridge's net-jail could hold there; update its capabilities")
	}
}

// TestVendor_RuntimeMissing: a runtime the engine lacks is a spec error
// that names what the engine has, and how to add gVisor.
func TestVendor_RuntimeMissing(t *testing.T) {
	t.Parallel()
	env := testbed.Require(t)
	v, err := New(WithHost(env.DockerHost), WithNetwork("boxctl-test"), WithGVisorRuntime("no-such-runsc"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	_, err = v.Create(t.Context(), vendors.CreateSpec{Image: "unused", RunTag: vendortest.RunTag(t), Lifetime: time.Minute, Runtime: vendors.RuntimeGVisor})
	var se *vendors.SpecError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), `runtime "no-such-runsc"`) || !strings.Contains(err.Error(), "runc") ||
		!strings.Contains(err.Error(), "for gVisor, install runsc") {
		t.Fatalf("Create under a missing gVisor runtime = %v, want a SpecError naming the engine's runtimes and how to add gVisor", err)
	}
}

// TestVendor_SweepFailedGVisorStart plants a start that fails under runsc
// (host networking, which runsc refuses without its own flag): the
// engine forgets the container, its sandbox and gofer run on. A dry
// sweep lists them and ends nothing; gc's reaper ends them.
func TestVendor_SweepFailedGVisorStart(t *testing.T) {
	t.Parallel()
	v, img := gvisorVendor(t)
	ctx := t.Context()
	created, err := v.cli.ContainerCreate(ctx, &container.Config{Image: img},
		&container.HostConfig{Runtime: v.opts.gvisor, NetworkMode: "host"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	if err := v.cli.ContainerStart(ctx, id, container.StartOptions{}); err == nil {
		_ = v.cli.ContainerRemove(context.WithoutCancel(ctx), id, container.RemoveOptions{Force: true})
		t.Fatal("a box with host networking started under runsc: plant another failure")
	}
	if err := v.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	left := leftoverPIDs(t, id)
	if len(left) == 0 {
		t.Fatal("the failed start left no process: the plant no longer reproduces the leak")
	}
	dry, err := v.Sweep(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(dry, func(l vendors.Leftover) bool { return l.BoxID == id && len(l.PIDs) >= len(left) }) {
		t.Fatalf("dry sweep = %+v, want %s with its %d processes", dry, id[:12], len(left))
	}
	if again := leftoverPIDs(t, id); len(again) != len(left) {
		t.Fatalf("a dry sweep ended processes: %v left of %v", again, left)
	}
	reaped, err := reaper.Reap(ctx, v, reaper.Options{Filter: map[string]string{"boxctl.test/none": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(reaped, func(r reaper.Reaped) bool {
		return r.Box.ID == id && r.Reason == reaper.ReasonLeftover && r.Err == nil
	}) {
		t.Fatalf("reap = %+v, want %s ended as a leftover", reaped, id[:12])
	}
	polltest.Until(t, 10*time.Second, "no process of the failed start runs", func() bool { return len(leftoverPIDs(t, id)) == 0 })
}

// leftoverPIDs are the live processes whose command line names id.
func leftoverPIDs(t *testing.T, id string) []int {
	t.Helper()
	procs, err := readProcs()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for pid, cmd := range procs.cmd {
		if strings.Contains(strings.Join(cmd, " "), id) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestVendor_SuspendableGVisorNeedsLayer: a suspendable box under a gVisor
// runtime that keeps the box's files in its own overlay is refused.
func TestVendor_SuspendableGVisorNeedsLayer(t *testing.T) {
	v := &Vendor{opts: makeOptions(nil)}
	for _, tc := range []struct {
		name string
		rt   system.Runtime
		ok   bool
	}{
		{"runsc, own overlay", system.Runtime{Path: "/usr/local/bin/runsc"}, false},
		{"runsc, overlay off", system.Runtime{Path: "/usr/local/bin/runsc", Args: []string{"--overlay2=none"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v.runtimes.Store(DefaultGVisorRuntime, tc.rt)
			for _, retention := range []time.Duration{0, time.Hour} {
				_, err := v.runtime(t.Context(), vendors.CreateSpec{Runtime: vendors.RuntimeGVisor, Retention: retention})
				var se *vendors.SpecError
				if refused := errors.As(err, &se) && strings.Contains(err.Error(), "--overlay2=none"); refused != (retention > 0 && !tc.ok) {
					t.Errorf("retention %v: runtime() = %v", retention, err)
				}
			}
		})
	}
}
