package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/egress/egresstest"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
	"github.com/tangle-network/boxctl/vendors/open"
)

// TestBoxVerbs_Egress drives a confined box from the command line: a
// plain up (egress denied by default) claims a box from a confined pool
// (pool up), and that box reaches the broker (its turn runs) and
// nothing else; net --allow opens one address and port of a listener of
// the test's, net --deny closes it again, each holding when net returns;
// ls shows the policy. up --egress open makes an open box, cold.
func TestBoxVerbs_Egress(t *testing.T) {
	env := testbed.Require(t)
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	v := liveVendor(t)
	// Last: the kernel rules the user's broker left (they outlive it by
	// design) and the confined network.
	t.Cleanup(func() {
		bridge, _, err := v.EgressBridge(context.Background())
		if err == nil {
			err = firewall.Uninstall(bridge)
		}
		if err != nil {
			t.Errorf("remove the confined network's rules: %v", err)
		}
		if err := cli.NetworkRemove(context.Background(), v.Network()+docker.EgressSuffix); err != nil {
			t.Logf("remove the confined network: %v", err)
		}
	})
	img := boxtest.Image(t, boxtest.Options{})
	useState(t)
	t.Setenv(brokerIdleEnv, "30s")
	cleanupState(t, v)

	target := netip.AddrPortFrom(egresstest.Network(t, cli, "bxt-net-"), 18080)
	sink := egresstest.ListenTCP(t, target.String(), []byte("reached"))
	probe := `node -e 'const s=require("net").connect({host:"` + target.Addr().String() + `",port:` + "18080" + `},()=>s.write("probe"));
s.setTimeout(3000,()=>{console.log("timeout");s.destroy()});s.on("data",d=>{console.log(String(d));s.destroy()});s.on("error",e=>console.log("error",e.code))'`

	// A pool keeps a confined box (the default), and a plain up (egress
	// denied by default) claims it.
	kctx, stopKeeper := context.WithCancel(t.Context())
	kept := make(chan cmdResult, 1)
	go func() {
		var out, status lockedBuffer
		kept <- boxctlTo(t, kctx, nil, &out, &status, "pool", "up", "--image", img, "--size", "1", "--max-age", "1h")
	}()
	var stopOnce sync.Once
	stopPool := func() { stopOnce.Do(func() { stopKeeper(); <-kept }) }
	defer stopPool()
	name := pool.DefaultName("docker", "claude-code", img, "") + pool.ConfinedSuffix
	polltest.UntilNil(t, 3*time.Minute, "a box waiting in pool "+name, func() error {
		var pools []pool.Summary
		r := boxctl(t, t.Context(), nil, "pool", "ls", "-o", "json")
		if err := json.Unmarshal([]byte(r.stdout), &pools); r.code != 0 || err != nil {
			return fmt.Errorf("pool ls: exit %d, %v", r.code, err)
		}
		if i := slices.IndexFunc(pools, func(p pool.Summary) bool { return p.Name == name }); i < 0 || pools[i].Ready < 1 {
			return fmt.Errorf("pools %+v", pools)
		}
		return nil
	})
	r := boxctl(t, t.Context(), nil, "up", "--router", "local", "--image", img, "--lifetime", "10m", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil || up.Egress != "deny" || up.Pool != pool.Hit {
		t.Fatalf("up printed %q (%v): want egress deny, claimed from the confined pool", r.stdout, err)
	}
	if r := boxctl(t, t.Context(), nil, "turn", "last", "Say hello"); r.code != 0 || !strings.Contains(r.stdout, localReply) {
		t.Fatalf("turn in a confined box: exit %d, %q: want the broker reached", r.code, r.stdout)
	}
	try := func() string {
		r := boxctl(t, t.Context(), nil, "exec", "last", "--", "sh", "-c", probe)
		return strings.TrimSpace(r.stdout)
	}
	if out := try(); out == "reached" || sink.Bytes() != 0 {
		t.Fatalf("deny: the box reached the test's listener (%q, %d bytes)", out, sink.Bytes())
	}
	r = boxctl(t, t.Context(), nil, "net", "last", "--allow", target.String())
	if r.code != 0 || !strings.Contains(r.stdout, "deny+"+target.String()) {
		t.Fatalf("net --allow: exit %d, %q", r.code, r.stdout)
	}
	if out := try(); out != "reached" {
		t.Fatalf("allowed: the box got %q, want the listener reached", out)
	}
	r = boxctl(t, t.Context(), nil, "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "EGRESS") || !strings.Contains(r.stdout, "deny+"+target.String()) {
		t.Errorf("ls: exit %d, %q: want the box's policy", r.code, r.stdout)
	}
	start := time.Now()
	if r := boxctl(t, t.Context(), nil, "net", "last", "--deny", target.String()); r.code != 0 || !strings.Contains(r.stdout, "deny") {
		t.Fatalf("net --deny: exit %d, %q", r.code, r.stdout)
	}
	t.Logf("net --deny took %v", time.Since(start).Round(time.Millisecond))
	before := sink.Bytes()
	if out := try(); out == "reached" || sink.Bytes() != before {
		t.Fatalf("denied again: the box got %q (%d more bytes)", out, sink.Bytes()-before)
	}
	if r := boxctl(t, t.Context(), nil, "net", "last", "--allow", "example.com:22"); r.code != 2 {
		t.Errorf("net --allow with a bad port: exit %d, want 2", r.code)
	}
	// rm forgets the box's address at the broker's gate: the next box
	// there gets no policy of this one's. The pool ends first: a box it
	// makes after the rm may take the address, with a policy of its own.
	stopPool()
	box, err := v.Connect(t.Context(), up.ID)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := box.(vendors.Addressed).Address(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bridge, _, err := v.EgressBridge(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s, err := boxstate.Open(boxstate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := gate.Dial(brokerSocket(s), bridge)
	if _, err := g.Policy(t.Context(), addr); err != nil {
		t.Fatalf("the gate's policy of the box at %v: %v", addr, err)
	}
	if r := boxctl(t, t.Context(), nil, "rm", "last"); r.code != 0 {
		t.Errorf("rm: exit %d: %v", r.code, r.err)
	}
	if p, err := g.Policy(t.Context(), addr); err == nil {
		t.Errorf("after rm the gate still holds %v at the box's address %v", p, addr)
	}

	// Open by choice: no open pool waits, so the box is made cold, and it
	// reaches the listener.
	r = boxctl(t, t.Context(), nil, "up", "--router", "local", "--image", img, "--lifetime", "10m", "--egress", "open", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &up); r.code != 0 || err != nil || up.Egress != "open" || up.Pool != pool.Cold {
		t.Fatalf("up --egress open: exit %d, %q (%v): want an open box made cold", r.code, r.stdout, err)
	}
	if out := try(); out != "reached" {
		t.Errorf("an open box got %q, want the listener reached", out)
	}
	if r := boxctl(t, t.Context(), nil, "rm", "last"); r.code != 0 {
		t.Errorf("rm: exit %d: %v", r.code, r.err)
	}
}

// TestBoxVerbs_EgressE2B is TestBoxVerbs_Egress on E2B (its emulator, on
// Docker networks of the test's own): up sends the policy as E2B's
// network rules (the broker's address among them, so the turn runs), net
// changes them through E2B's update route, and a rule E2B's rules cannot
// say (a port) is refused, never widened.
func TestBoxVerbs_EgressE2B(t *testing.T) {
	env := testbed.Require(t)
	cli, err := dockerclient.New(env.DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	network := "bxn-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	t.Cleanup(func() {
		for _, n := range []string{network + docker.EgressSuffix, network} {
			if err := cli.NetworkRemove(context.Background(), n); err != nil && !strings.Contains(err.Error(), "not found") {
				t.Errorf("remove network %s: %v", n, err)
			}
		}
	})
	img := boxtest.Image(t, boxtest.Options{})
	emu := e2btest.Start(t, func(o *e2bemu.Options) { o.Network, o.Templates = network, map[string]string{"box": img} })
	for k, v := range e2bemu.SDKEnv("http://"+emu.Addr, emu.Server.Domain(), e2btest.APIKey) {
		t.Setenv(k, v)
	}
	t.Setenv(open.EnvE2BDial, emu.Addr)
	dv, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(network))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dv.Close() })
	host, err := dv.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(open.EnvE2BHost, host)
	useState(t)
	t.Setenv(brokerIdleEnv, "30s")

	target := netip.AddrPortFrom(egresstest.Network(t, cli, "bxt-net-"), 18080)
	sink := egresstest.ListenTCP(t, target.String(), []byte("reached"))
	probe := `node -e 'const s=require("net").connect({host:"` + target.Addr().String() + `",port:18080},()=>s.write("probe"));
s.setTimeout(3000,()=>{console.log("timeout");s.destroy()});s.on("data",d=>{console.log(String(d));s.destroy()});s.on("error",e=>console.log("error",e.code))'`

	if r := boxctl(t, t.Context(), nil, "up", "--target", "e2b", "--router", "local", "--image", "box", "--lifetime", "10m",
		"--allow", target.String()); r.code == 0 || r.err == nil || !strings.Contains(r.err.Error(), "no port") {
		t.Fatalf("up --target e2b --allow IP:PORT = exit %d, %v; want a refusal naming the port", r.code, r.err)
	}
	r := boxctl(t, t.Context(), nil, "up", "--target", "e2b", "--router", "local", "--image", "box", "--lifetime", "10m",
		"--egress", "deny", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up --target e2b --egress deny: exit %d: %v", r.code, r.err)
	}
	if r := boxctl(t, t.Context(), nil, "turn", "last", "Say hello"); r.code != 0 || !strings.Contains(r.stdout, localReply) {
		t.Fatalf("turn in a confined E2B box: exit %d, %q: want the broker reached", r.code, r.stdout)
	}
	try := func() string {
		r := boxctl(t, t.Context(), nil, "exec", "last", "--", "sh", "-c", probe)
		return strings.TrimSpace(r.stdout)
	}
	if out := try(); out == "reached" || sink.Bytes() != 0 {
		t.Fatalf("deny: the box reached the test's listener (%q, %d bytes)", out, sink.Bytes())
	}
	r = boxctl(t, t.Context(), nil, "net", "last", "--allow", target.Addr().String())
	if r.code != 0 || !strings.Contains(r.stdout, "deny+"+target.Addr().String()) {
		t.Fatalf("net --allow: exit %d, %q, %v", r.code, r.stdout, r.err)
	}
	if out := try(); out != "reached" {
		t.Fatalf("allowed: the box got %q, want the listener reached", out)
	}
	if r := boxctl(t, t.Context(), nil, "net", "last", "--deny", target.Addr().String()); r.code != 0 {
		t.Fatalf("net --deny: exit %d, %q, %v", r.code, r.stdout, r.err)
	}
	before := sink.Bytes()
	if out := try(); out == "reached" || sink.Bytes() != before {
		t.Fatalf("denied again: the box got %q (%d more bytes)", out, sink.Bytes()-before)
	}
	if r := boxctl(t, t.Context(), nil, "rm", "last"); r.code != 0 {
		t.Errorf("rm: exit %d: %v", r.code, r.err)
	}
}
