package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
	"github.com/tangle-network/boxctl/vendors/open"
)

// TestKubernetes_BuildUpTurn pushes the box image with `boxctl build
// --target registry`, then drives a box of it on the test bed's cluster
// with the box verbs and --target kubernetes: up (the image from the last
// registry build, the local model endpoint where the pods reach this
// machine), turn, exec, logs, ls, rm and gc. Neither the bearer nor the
// router key is ever printed.
func TestKubernetes_BuildUpTurn(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("BUILDKIT_HOST", env.BuildkitHost)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("KUBECONFIG", env.Kubeconfig)
	dv, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork("boxctl-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dv.Close() })
	host, err := dv.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(open.EnvKubeHost, host)
	useState(t)
	kv := kubetest.Vendor(t)
	cleanupState(t, kv)
	tr := &transcript{}

	r := boxctl(t, t.Context(), tr, "build", "--target", "registry", "--push", env.Registry+"/boxctl-test/kube-cli",
		"--harness", "claude-code", "--base", env.BaseImage, "--bridge", boxbridgetest.Build(t),
		"--insecure-registry", env.Registry, "--progress", "plain", "-o", "json")
	if r.code != 0 {
		t.Fatalf("build --target registry: exit %d: %v", r.code, r.err)
	}
	rec := decodeRecord(t, r.stdout)
	if rec.Target != "registry" || !strings.HasPrefix(rec.Reference, env.Registry+"/boxctl-test/kube-cli") {
		t.Fatalf("build record = %+v, want the pushed image", rec)
	}

	// Egress denied by default, through a relay the broker serves where
	// the pods reach it.
	relay := kubetest.FreeRelay(t)
	t.Setenv(open.EnvKubeEgressRelay, relay.String())
	r = boxctl(t, t.Context(), tr, "up", "--target", "kubernetes", "--router", "local", "--lifetime", "10m", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up --target kubernetes: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(up.ID, "boxctl-") || up.Image != rec.Reference || up.Egress != "deny" {
		t.Errorf("up printed %+v, want a confined Sandbox of the registry build %s", up, rec.Reference)
	}
	if r := boxctl(t, t.Context(), tr, "turn", "last", "Hello from Kubernetes"); r.code != 0 || !strings.Contains(r.stdout, localReply) {
		t.Fatalf("turn: exit %d (%v), stdout %q; want the local model's reply", r.code, r.err, r.stdout)
	}
	if r := boxctl(t, t.Context(), tr, "exec", "last", "--", "sh", "-c", "cat /etc/resolv.conf"); r.code != 0 || !strings.Contains(r.stdout, "nameserver "+relay.String()) {
		t.Errorf("the box's resolv.conf: exit %d, %q; want the relay %s", r.code, r.stdout, relay)
	}
	if r := boxctl(t, t.Context(), tr, "net", "last", "--allow", "192.0.2.7:5432"); r.code != 0 {
		t.Fatalf("net --allow: exit %d: %v", r.code, r.err)
	}
	if np := kubetest.Kubectl(t, "get", "networkpolicy/"+up.ID, "-o", "jsonpath={.spec.egress[*].to[*].ipBlock.cidr}"); !strings.Contains(string(np), "192.0.2.7/32") ||
		!strings.Contains(string(np), relay.String()+"/32") {
		t.Errorf("the box's NetworkPolicy reaches %q; want the relay and the address net allowed", np)
	}
	if r := boxctl(t, t.Context(), tr, "exec", "last", "--", "sh", "-c", "echo in-$(id -u)"); r.code != 0 || r.stdout != "in-10001\n" {
		t.Errorf("exec: exit %d (%v), stdout %q", r.code, r.err, r.stdout)
	}
	if r := boxctl(t, t.Context(), tr, "logs", "last"); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "level=") {
		t.Errorf("logs: exit %d (%v), %q", r.code, r.err, r.stdout+r.stderr)
	}
	r = boxctl(t, t.Context(), tr, "ls", "--target", "kubernetes", "-o", "json")
	var rows []boxstate.Row
	if err := json.Unmarshal([]byte(r.stdout), &rows); r.code != 0 || err != nil || !hasBox(rows, up.ID) {
		t.Fatalf("ls --target kubernetes = %q (exit %d, %v), want the box, in the state", r.stdout, r.code, err)
	}
	secrets := map[string]string{"bearer": mustState(t).Find(up.ID).Reference.Bearer}
	yaml := kubetest.Kubectl(t, "get", "sandbox/"+up.ID, "-o", "yaml")
	if strings.Contains(string(yaml), secrets["bearer"]) {
		t.Error("the bearer appears in the Sandbox")
	}
	if r := boxctl(t, t.Context(), tr, "rm", "--target", "kubernetes", "last"); r.code != 0 {
		t.Fatalf("rm --target kubernetes last: exit %d: %v", r.code, r.err)
	}
	polltest.Until(t, 30*time.Second, "the box to be gone", func() bool { return boxGone(t, kv, up.ID) })
	r = boxctl(t, t.Context(), tr, "gc", "--target", "kubernetes", "--dry-run", "-o", "json")
	var res boxstate.Collected
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil {
		t.Errorf("gc --target kubernetes = %q (exit %d, %v)", r.stdout, r.code, err)
	}
	for _, b := range res.Removed {
		if b.ID == up.ID {
			t.Errorf("gc after rm finds the removed box %s", up.ID)
		}
	}
	tr.noSecrets(t, secrets)
	kubePoolUpClaim(t, kv, tr, rec.Reference)
}

// kubePoolUpClaim keeps a Kubernetes warm pool with `boxctl pool up
// --target kubernetes` and claims from it with a plain `boxctl up`: the
// box is a pod of the pool, its result says hit, and a turn runs; Ctrl-C
// of the keeper deletes the pool and leaves the claimed box.
func kubePoolUpClaim(t *testing.T, kv *kubernetes.Vendor, tr *transcript, image string) {
	name := pool.DefaultName("kubernetes", "claude-code", image, "")
	kctx, stop := context.WithCancel(t.Context())
	kept := make(chan cmdResult, 1)
	var status lockedBuffer
	metrics := "127.0.0.1:" + freePort(t)
	go func() {
		var out lockedBuffer
		kept <- boxctlTo(t, kctx, tr, &out, &status, "pool", "up", "--target", "kubernetes", "--egress", "open", "--size", "1", "--max-age", "1h", "--metrics", metrics)
	}()
	defer func() {
		stop()
		<-kept
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	polltest.Until(t, 3*time.Minute, "the pool "+name+" to be made", func() bool {
		_, err := kv.PoolState(ctx, name)
		return err == nil
	})
	if err := kv.WaitPool(ctx, name); err != nil {
		t.Fatal(err)
	}
	// The keeper's metrics and pool ls see the ready pod.
	polltest.Until(t, time.Minute, "the keeper's metrics to show the ready pod", func() bool {
		res, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return strings.Contains(string(body), `boxctl_pool_ready{pool="`+name+`"} 1`) &&
			strings.Contains(string(body), `boxctl_pool_size{pool="`+name+`"} 1`)
	})
	var pools []pool.Summary
	if r := boxctl(t, t.Context(), tr, "pool", "ls", "--target", "kubernetes", "-o", "json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &pools) != nil {
		t.Fatalf("pool ls --target kubernetes: exit %d (%v): %s", r.code, r.err, r.stdout)
	}
	if i := slices.IndexFunc(pools, func(p pool.Summary) bool { return p.Name == name }); i < 0 || pools[i].Want != 1 || pools[i].Ready != 1 || pools[i].Oldest.IsZero() || !pools[i].VendorKept {
		t.Errorf("pool ls --target kubernetes = %+v, want %s with 1 of 1 ready", pools, name)
	}
	if r := boxctl(t, t.Context(), tr, "pool", "ls", "--target", "docker", "-o", "json"); r.code != 0 || strings.Contains(r.stdout, name) {
		t.Errorf("pool ls --target docker: exit %d, %s; want this machine's docker pools, not %s", r.code, r.stdout, name)
	}
	r := boxctl(t, t.Context(), tr, "up", "--target", "kubernetes", "--egress", "open", "--router", "local", "--lifetime", "10m", "-o", "json")
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); r.code != 0 || err != nil {
		t.Fatalf("up from the pool: exit %d: %v %v", r.code, r.err, err)
	}
	box, err := kv.Connect(t.Context(), up.ID)
	if err != nil {
		t.Fatal(err)
	}
	if pod := box.(*kubernetes.Box).Pod(); up.Pool != pool.Hit || !strings.HasPrefix(pod, name+"-") {
		t.Errorf("up = pool %q, pod %s; want a hit on a pod of pool %s", up.Pool, pod, name)
	}
	if r := boxctl(t, t.Context(), tr, "turn", "last", "Hello from the pool"); r.code != 0 || !strings.Contains(r.stdout, localReply) {
		t.Fatalf("turn on the claimed box: exit %d (%v), stdout %q", r.code, r.err, r.stdout)
	}
	stop()
	if res := <-kept; res.code != 0 || !strings.Contains(status.String(), "pool "+name+": ") || !strings.Contains(status.String(), "closing pool "+name) {
		t.Errorf("pool up: exit %d (%v), status %q; want status lines, then the pool deleted", res.code, res.err, status.String())
	}
	kept <- cmdResult{}
	if _, err := kv.PoolState(t.Context(), name); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("the pool after its keeper's end: %v, want it deleted", err)
	}
	if _, err := kv.Connect(t.Context(), up.ID); err != nil {
		t.Errorf("the claimed box after the pool's end: %v, want it kept", err)
	}
	if r := boxctl(t, t.Context(), tr, "rm", "--target", "kubernetes", "last"); r.code != 0 {
		t.Fatalf("rm: exit %d: %v", r.code, r.err)
	}
}

func hasBox(rows []boxstate.Row, id string) bool {
	for _, r := range rows {
		if r.ID == id && r.InState {
			return true
		}
	}
	return false
}
