package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

func newVendor(t *testing.T, opts ...Option) (*Vendor, string) {
	t.Helper()
	env := testbed.Require(t)
	img := boxtest.Image(t, boxtest.Options{})
	v, err := New(append([]Option{WithHost(env.DockerHost), WithNetwork("boxctl-test")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, img
}

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

func TestVendor_Suite(t *testing.T) {
	v, img := newVendor(t)
	vendortest.Run(t, vendortest.Config{Vendor: v, Image: img, Describe: describe})
}

// describe returns the engine's raw inspect data of the box and its execs.
func describe(t testing.TB, b vendors.Box, _ vendors.Process) []byte {
	return []byte(boxtest.Inspect(t, b.ID()))
}

func create(t *testing.T, v *Vendor, spec vendors.CreateSpec) vendors.Box {
	t.Helper()
	if spec.RunTag == "" {
		spec.RunTag = vendortest.RunTag(t)
	}
	if spec.Lifetime == 0 {
		spec.Lifetime = 5 * time.Minute
	}
	box, err := v.Create(t.Context(), spec)
	if box != nil {
		t.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(t.Context())) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return box
}

func exec1(t *testing.T, b vendors.Box, cmd ...string) vendors.ExecResult {
	t.Helper()
	res, err := b.Exec(t.Context(), vendors.ExecSpec{Command: cmd})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return res
}

func TestVendor_Hardened(t *testing.T) {
	t.Parallel()
	v, img := newVendor(t)
	box := create(t, v, vendors.CreateSpec{Image: img, Ports: []int{3344}})

	res := exec1(t, box, "sh", "-c", "id -u; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status")
	got := strings.Fields(string(res.Stdout))
	want := []string{"10001", "CapInh:", "0000000000000000", "CapPrm:", "0000000000000000", "CapEff:", "0000000000000000",
		"CapBnd:", "0000000000000000", "CapAmb:", "0000000000000000", "NoNewPrivs:", "1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("process status in a box = %q, want non-root, no capabilities, no new privileges", res.Stdout)
	}
	c, err := v.cli.ContainerInspect(t.Context(), box.ID())
	if err != nil {
		t.Fatal(err)
	}
	hc := c.HostConfig
	if !hc.AutoRemove || string(hc.NetworkMode) != v.netID || hc.PidsLimit == nil || *hc.PidsLimit != DefaultPids ||
		hc.NanoCPUs != int64(DefaultCPUs*1e9) || hc.Memory != DefaultMemory || hc.Privileged {
		t.Errorf("host config = auto-remove %v, network %s, pids %v, cpus %d, memory %d; want the hardened defaults",
			hc.AutoRemove, hc.NetworkMode, hc.PidsLimit, hc.NanoCPUs, hc.Memory)
	}
	for port, binds := range hc.PortBindings {
		for _, b := range binds {
			if b.HostIP != "127.0.0.1" || b.HostPort != "" {
				t.Errorf("port %s bound on %s:%s, want 127.0.0.1 on an ephemeral port", port, b.HostIP, b.HostPort)
			}
		}
	}
	var profiles int
	for _, o := range hc.SecurityOpt {
		if strings.Contains(o, "unconfined") {
			t.Errorf("security option %.60q... is unconfined", o)
		}
		if strings.HasPrefix(o, "seccomp={") {
			profiles++
		}
	}
	if want, _ := jailSeccomp(); profiles != 1 || !slices.Contains(hc.SecurityOpt, want) {
		t.Errorf("the box runs under %d seccomp profiles, want the jail profile alone", profiles)
	}
	if masked, _ := jailPaths(); !slices.Equal(hc.MaskedPaths, masked) {
		t.Errorf("masked paths = %v, want %v", hc.MaskedPaths, masked)
	}
	if c.Config.Labels[boxmeta.LabelDeadline] == "" || !strings.Contains(strings.Join(c.Config.Env, " "), boxmeta.EnvDeadline+"=") {
		t.Errorf("box lacks its deadline: labels %v env %v", c.Config.Labels, c.Config.Env)
	}
}

func TestVendor_ForkBombHitsPidsLimit(t *testing.T) {
	t.Parallel()
	v, img := newVendor(t)
	bomb := create(t, v, vendors.CreateSpec{Image: img, Resources: vendors.Resources{Pids: 64}})
	other := create(t, v, vendors.CreateSpec{Image: img})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// A classic fork bomb, bounded in time by the context.
	_, _ = bomb.Spawn(ctx, vendors.SpawnSpec{Name: "bomb", Command: []string{"sh", "-c", `b() { b | b & }; b; sleep 60`}})
	polltest.Until(t, 20*time.Second, "the bomb to reach the pids limit", func() bool {
		res, err := bomb.Exec(t.Context(), vendors.ExecSpec{Command: []string{"cat", "/sys/fs/cgroup/pids.current"}})
		if err != nil || res.ExitCode != 0 {
			// The exec itself may not fork: that is the limit working.
			return true
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		return err == nil && n >= 60
	})
	if res := exec1(t, other, "echo", "alive"); string(res.Stdout) != "alive\n" {
		t.Errorf("another box during the bomb: %q", res.Stdout)
	}
	if out, err := exec.CommandContext(t.Context(), "sh", "-c", "echo host alive").Output(); err != nil || string(out) != "host alive\n" {
		t.Errorf("host during the bomb: %q %v", out, err)
	}
	if err := bomb.Destroy(t.Context()); err != nil {
		t.Errorf("destroy the bomb's box: %v", err)
	}
}

// TestVendor_BoxesCannotReachEachOther checks, with ports published and
// direct, that a box's port answers this machine at its endpoint and no
// other box.
func TestVendor_BoxesCannotReachEachOther(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts []Option
	}{{"published", nil}, {"direct", []Option{WithDirectPorts()}}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			boxesCannotReachEachOther(t, len(tt.opts) > 0, tt.opts...)
		})
	}
}

func boxesCannotReachEachOther(t *testing.T, direct bool, opts ...Option) {
	v, img := newVendor(t, opts...)
	server := create(t, v, vendors.CreateSpec{Image: img, Ports: []int{8080}})
	client := create(t, v, vendors.CreateSpec{Image: img})
	if _, err := server.Spawn(t.Context(), vendors.SpawnSpec{Command: []string{"node", "-e",
		`require("http").createServer((q, s) => s.end("ok")).listen(8080, "0.0.0.0")`}}); err != nil {
		t.Fatal(err)
	}
	c, err := v.cli.ContainerInspect(t.Context(), server.ID())
	if err != nil {
		t.Fatal(err)
	}
	ip := c.NetworkSettings.Networks["boxctl-test"].IPAddress
	ep, err := server.Endpoint(t.Context(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	switch published := len(c.HostConfig.PortBindings) > 0; {
	case direct && (published || ep.URL != "http://"+ip+":8080"):
		t.Errorf("direct ports: endpoint %s, bindings %v; want http://%s:8080 and none", ep.URL, c.HostConfig.PortBindings, ip)
	case !direct && (!published || !strings.HasPrefix(ep.URL, "http://127.0.0.1:")):
		t.Errorf("published ports: endpoint %s, bindings %v; want one on 127.0.0.1", ep.URL, c.HostConfig.PortBindings)
	}
	polltest.Until(t, 30*time.Second, "the server box to answer its host", func() bool {
		resp, err := http.Get(ep.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	res := exec1(t, client, "node", "-e", `fetch("http://`+ip+`:8080", {signal: AbortSignal.timeout(3000)}).then(() => process.exit(0), () => process.exit(7))`)
	if res.ExitCode != 7 {
		t.Errorf("a box reached another box at %s:8080 (exit %d, %s)", ip, res.ExitCode, res.Stderr)
	}
	host, err := v.HostAddress(t.Context())
	if err != nil || host == "" {
		t.Errorf("HostAddress = %q, %v", host, err)
	}
}

func TestVendor_ConcurrentCreates(t *testing.T) {
	t.Parallel()
	v, img := newVendor(t)
	tag := vendortest.RunTag(t)
	const n = 20
	var mu sync.Mutex
	var boxes []vendors.Box
	t.Cleanup(func() {
		for _, b := range boxes {
			_ = b.Destroy(context.WithoutCancel(t.Context()))
		}
	})
	g, ctx := errgroup.WithContext(t.Context())
	start := time.Now()
	for range n {
		g.Go(func() error {
			b, err := v.Create(ctx, vendors.CreateSpec{Image: img, RunTag: tag, Lifetime: 5 * time.Minute, Ports: []int{3344}})
			if b != nil {
				mu.Lock()
				boxes = append(boxes, b)
				mu.Unlock()
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("%d concurrent creates: %v", n, err)
	}
	t.Logf("%d concurrent creates in %v", n, time.Since(start).Round(time.Millisecond))
	list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil || len(list) != n {
		t.Fatalf("List = %d boxes, %v; want %d", len(list), err, n)
	}
	g = &errgroup.Group{}
	for _, b := range boxes {
		g.Go(func() error { return b.Destroy(t.Context()) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag}); err != nil || len(list) != 0 {
		t.Errorf("List after destroy = %d boxes, %v; want none", len(list), err)
	}
}

func TestVendor_FailedCreateLeavesNoBox(t *testing.T) {
	t.Parallel()
	v, img := newVendor(t)
	tag := vendortest.RunTag(t)
	_, err := v.Create(t.Context(), vendors.CreateSpec{Image: img, RunTag: tag, Lifetime: time.Minute, Runtime: "no-such-runtime"})
	if err == nil {
		t.Fatal("Create with an unknown runtime succeeded")
	}
	var ce *vendors.CleanupError
	if errors.As(err, &ce) {
		t.Fatalf("Create = %v, want the box removed", err)
	}
	if list, _ := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag}); len(list) != 0 {
		t.Errorf("a failed create left %d boxes", len(list))
	}
	if _, err := v.Create(t.Context(), vendors.CreateSpec{Image: "127.0.0.1:5000/boxctl/no-such-image:x", RunTag: tag, Lifetime: time.Minute}); err == nil {
		t.Error("Create from a missing image succeeded")
	}
	_ = json.Valid
}

// A create cut short by its context at any point leaves no box: one the
// engine makes after the cancellation is removed too. The cancels land
// from the start of the call to past its end, in steps.
func TestVendor_CancelledCreateLeavesNoBox(t *testing.T) {
	t.Parallel()
	v, img := newVendor(t)
	tag := vendortest.RunTag(t)
	var g errgroup.Group
	g.SetLimit(4)
	made := 0
	var mu sync.Mutex
	for i := range 16 {
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i)*50*time.Millisecond)
			defer cancel()
			box, err := v.Create(ctx, vendors.CreateSpec{Image: img, RunTag: tag, Lifetime: time.Minute})
			var ce *vendors.CleanupError
			switch {
			case errors.As(err, &ce):
				return fmt.Errorf("Create cancelled after %v = %v, want the box removed", time.Duration(i)*50*time.Millisecond, err)
			case err == nil:
				mu.Lock()
				made++
				mu.Unlock()
				return box.Destroy(context.WithoutCancel(t.Context()))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil || len(list) != 0 {
		t.Fatalf("after 16 cancelled creates (%d finished first) List = %d boxes, %v; want none", made, len(list), err)
	}
}

// userNamespacesAllowed fails t, saying why, when this host refuses user
// namespaces to unprivileged users: then no jail can run in any box.
func userNamespacesAllowed(t *testing.T) {
	t.Helper()
	for _, c := range []struct{ file, refuse string }{
		{"/proc/sys/user/max_user_namespaces", "0"},
		{"/proc/sys/kernel/unprivileged_userns_clone", "0"}, // Debian's patch; absent upstream
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"},
	} {
		b, err := os.ReadFile(c.file)
		if err == nil && strings.TrimSpace(string(b)) == c.refuse {
			t.Fatalf("this host refuses unprivileged user namespaces (%s is %s), so bubblewrap cannot run in a box: set it to allow them", c.file, c.refuse)
		}
	}
}

// jailProbe is the bridge's own bwrap probe (bridge/jail), run as the
// box's user.
var jailProbe = []string{"bwrap", "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
	"--unshare-cgroup-try", "--cap-drop", "ALL", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
	"--tmpfs", "/tmp", "--", "sh", "-c", "touch /tmp/in && ! touch /home/box/out 2>/dev/null && cat /proc/1/comm"}

// TestVendor_BubblewrapRunsInBoxes runs bubblewrap in a box as the
// bridge's jail does: its namespaces, a read-only root with a private
// /tmp, its own /proc (whose pid 1 is bwrap's, not the box's init). A box
// made WithoutJails refuses it.
func TestVendor_BubblewrapRunsInBoxes(t *testing.T) {
	t.Parallel()
	userNamespacesAllowed(t)
	v, img := newVendor(t)
	stock, err := New(WithHost(v.opts.host), WithNetwork(v.opts.network), WithoutJails())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stock.Close() })
	for _, tc := range []struct {
		name string
		v    *Vendor
		ok   bool
	}{{"jail profile", v, true}, {"stock profile", stock, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			box := create(t, tc.v, vendors.CreateSpec{Image: img})
			res := exec1(t, box, jailProbe...)
			if tc.ok && (res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "bwrap") {
				t.Errorf("bwrap in a box: exit %d, stdout %q, stderr %q; want the jail's own pid 1, bwrap", res.ExitCode, res.Stdout, res.Stderr)
			}
			if !tc.ok && (res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "create new namespace")) {
				t.Errorf("bwrap in a box under Docker's stock profile: exit %d, stderr %q; want its namespaces refused", res.ExitCode, res.Stderr)
			}
			t.Logf("%s: exit %d %s%s", tc.name, res.ExitCode, res.Stdout, res.Stderr)
		})
	}
}
