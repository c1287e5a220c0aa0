package kubernetes_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
	"github.com/tangle-network/boxctl/vendors/reaper"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

func TestMain(m *testing.M) {
	if os.Getenv(orphanEnv) != "" {
		orphan()
		return
	}
	boxbridgetest.Main(m)
}

func describe(t testing.TB, b vendors.Box, _ vendors.Process) []byte {
	return kubetest.Describe(t, b)
}

func TestVendor_Suite(t *testing.T) {
	img := kubetest.Image(t, boxtest.Options{})
	// A pod starts in about a second on an idle node, but beside the other
	// tests' pods on two cores it may take several.
	vendortest.Run(t, vendortest.Config{Vendor: kubetest.Vendor(t), Image: img, Describe: describe, ShortLifetime: 20 * time.Second})
}

func create(t *testing.T, v vendors.Vendor, spec vendors.CreateSpec) vendors.Box {
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

// adminConfig is the test bed's admin client configuration.
func adminConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", testbed.Require(t).Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func clientset(t *testing.T) k8s.Interface {
	t.Helper()
	cs, err := k8s.NewForConfig(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestVendor_Hardened reads the pod the cluster runs: no service account
// token, non-root, no privilege escalation, no capabilities, the limits
// and the requests asked for, and the shutdown time on the Sandbox.
func TestVendor_Hardened(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	img := kubetest.Image(t, boxtest.Options{})
	box := create(t, v, vendors.CreateSpec{Image: img, Resources: vendors.Resources{CPUs: 1.5, MemoryBytes: 1 << 30, DiskBytes: 2 << 30},
		Owner: "pid:somehost:1:2", Labels: map[string]string{"team": "infra"}})
	pod, err := clientset(t).CoreV1().Pods(v.Namespace()).Get(t.Context(), box.(*kubernetes.Box).Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps := pod.Spec
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token")
	}
	for _, vol := range ps.Volumes {
		if vol.Projected != nil {
			t.Errorf("the pod has a projected volume %s", vol.Name)
		}
	}
	c := ps.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context = %+v", c.SecurityContext)
	}
	if got := c.Resources.Limits.Cpu().MilliValue(); got != 1500 {
		t.Errorf("cpu limit = %dm, want 1500m", got)
	}
	if got := c.Resources.Limits.Memory().Value(); got != 1<<30 {
		t.Errorf("memory limit = %d", got)
	}
	if got := c.Resources.Limits.StorageEphemeral().Value(); got != 2<<30 {
		t.Errorf("ephemeral-storage limit = %d", got)
	}
	if got := c.Resources.Requests.Cpu().MilliValue(); got != 100 {
		t.Errorf("cpu request = %dm, want 100m", got)
	}
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "id -u; grep CapEff /proc/self/status; ls /var/run/secrets 2>&1 || true"}})
	if err != nil {
		t.Fatal(err)
	}
	if out := string(res.Stdout); !strings.HasPrefix(out, "10001\n") || !strings.Contains(out, "CapEff:\t0000000000000000") {
		t.Errorf("in the box: %q", out)
	}
	info, err := box.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Owner() != "pid:somehost:1:2" || info.Labels["team"] != "infra" {
		t.Errorf("labels = %v", info.Labels)
	}
	if left := time.Until(info.Deadline); left <= 4*time.Minute || left > 5*time.Minute+2*time.Second {
		t.Errorf("deadline is %v away, want the 5m lifetime", left)
	}
	list, err := v.List(t.Context(), map[string]string{boxmeta.LabelOwner: "pid:somehost:1:2", boxmeta.LabelRunTag: info.RunTag()})
	if err != nil || len(list) != 1 {
		t.Errorf("List(owner, run tag) = %v, %v; want the box", list, err)
	}
}

// TestVendor_RefusesWhatKubernetesCannotCarry: a spec the cluster would
// refuse fails before any call, typed.
func TestVendor_RefusesWhatKubernetesCannotCarry(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	for name, spec := range map[string]vendors.CreateSpec{
		"pids":         {Resources: vendors.Resources{Pids: 10}},
		"label key":    {Labels: map[string]string{"not a key": "x"}},
		"env name":     {Env: map[string]string{"1X": "y"}},
		"deadline env": {Env: map[string]string{boxmeta.EnvDeadline: "1"}},
		"runtime":      {Runtime: "Not_A_Name"},
	} {
		t.Run(name, func(t *testing.T) {
			spec.Image, spec.Lifetime, spec.RunTag = "img", time.Minute, vendortest.RunTag(t)
			_, err := v.Create(t.Context(), spec)
			var se *vendors.SpecError
			if !errors.As(err, &se) && !errors.Is(err, vendors.ErrUnsupported) {
				t.Errorf("Create = %v, want a spec or unsupported error", err)
			}
		})
	}
}

// TestVendor_ImagePullError: a box of an image the registry does not have
// fails with the kubelet's reason, and nothing is left.
func TestVendor_ImagePullError(t *testing.T) {
	t.Parallel()
	env := testbed.Require(t)
	v := kubetest.Vendor(t)
	tag := vendortest.RunTag(t)
	start := time.Now()
	_, err := v.Create(t.Context(), vendors.CreateSpec{Image: env.Registry + "/boxctl-test/no-such-image:" + tag, Lifetime: time.Minute, RunTag: tag})
	var nr *kubernetes.NotReadyError
	if !errors.As(err, &nr) || (nr.Reason != "ErrImagePull" && nr.Reason != "ImagePullBackOff") {
		t.Fatalf("Create(missing image) = %v, want a NotReadyError with an image pull reason", err)
	}
	t.Logf("failed in %v: %v", time.Since(start).Round(time.Millisecond), err)
	if list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag}); err != nil || len(list) != 0 {
		t.Errorf("List(run tag) after the failed create = %v, %v; want none", list, err)
	}
}

// TestVendor_ConcurrentCreates: ten boxes at once all start, answer and
// go.
func TestVendor_ConcurrentCreates(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	img := kubetest.Image(t, boxtest.Options{})
	tag := vendortest.RunTag(t)
	const n = 10
	boxes := make([]vendors.Box, n)
	var g errgroup.Group
	start := time.Now()
	for i := range n {
		g.Go(func() error {
			b, err := v.Create(t.Context(), vendors.CreateSpec{Image: img, Lifetime: 5 * time.Minute, RunTag: tag})
			if err != nil {
				return fmt.Errorf("create %d: %w", i, err)
			}
			boxes[i] = b
			res, err := b.Exec(t.Context(), vendors.ExecSpec{Command: []string{"echo", "ok"}})
			if err != nil || string(res.Stdout) != "ok\n" {
				return fmt.Errorf("exec in box %d: %v %q", i, err, res.Stdout)
			}
			return nil
		})
	}
	err := g.Wait()
	t.Logf("%d concurrent creates ready in %v", n, time.Since(start).Round(time.Millisecond))
	var dg errgroup.Group
	for _, b := range boxes {
		if b != nil {
			dg.Go(func() error { return b.Destroy(context.WithoutCancel(t.Context())) })
		}
	}
	if derr := dg.Wait(); derr != nil {
		t.Errorf("destroy: %v", derr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag}); err != nil || len(list) != 0 {
		t.Errorf("List(run tag) after destroying all = %v, %v; want none", list, err)
	}
}

// orphanEnv makes the test binary a caller that creates a box, prints its
// id and waits to be killed.
const orphanEnv = "BOXCTL_KUBE_ORPHAN"

func orphan() {
	spec := strings.SplitN(os.Getenv(orphanEnv), "|", 4) // kubeconfig|image|run tag|lifetime
	v, err := kubernetes.New(kubernetes.WithKubeconfig(spec[0]))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	life, _ := time.ParseDuration(spec[3])
	b, err := v.Create(context.Background(), vendors.CreateSpec{Image: spec[1], Lifetime: life, RunTag: spec[2], Owner: reaper.ProcessOwner()})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(b.ID())
	select {}
}

// startOrphan runs a caller that creates a box of lifetime life, owned by
// the caller's process, and kills it with SIGKILL once the box exists; it
// returns the box's id.
func startOrphan(t *testing.T, kubeconfig, img, tag string, life time.Duration) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+kubeconfig+"|"+img+"|"+tag+"|"+life.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	id := strings.TrimSpace(line)
	if err != nil || strings.HasPrefix(id, "error:") {
		_ = cmd.Process.Kill()
		t.Fatalf("the caller: %q %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return id
}

// TestVendor_GCOwnerGone: gc removes a box whose owning process is gone,
// long before its deadline.
func TestVendor_GCOwnerGone(t *testing.T) {
	t.Parallel()
	env := testbed.Require(t)
	v := kubetest.Vendor(t)
	tag := vendortest.RunTag(t)
	id := startOrphan(t, env.Kubeconfig, kubetest.Image(t, boxtest.Options{}), tag, 10*time.Minute)
	t.Cleanup(func() {
		if b, err := v.Connect(context.Background(), id); err == nil {
			_ = b.Destroy(context.Background())
		}
	})
	reaped, err := reaper.Reap(t.Context(), v, reaper.Options{Filter: reaper.RunTagFilter(tag)})
	if err != nil || len(reaped) != 1 || reaped[0].Box.ID != id || reaped[0].Reason != reaper.ReasonOwnerGone || reaped[0].Err != nil {
		t.Fatalf("GC = %+v, %v; want the orphan %s, its owner gone", reaped, err, id)
	}
	if _, err := v.Connect(t.Context(), id); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("the orphan remains after GC: %v", err)
	}
}

// TestVendor_CallerKilled: a caller killed with SIGKILL right after its
// create leaves a box the cluster removes at its shutdown time, without
// gc.
func TestVendor_CallerKilled(t *testing.T) {
	t.Parallel()
	env := testbed.Require(t)
	v := kubetest.Vendor(t)
	img := kubetest.Image(t, boxtest.Options{})
	tag := vendortest.RunTag(t)
	id := startOrphan(t, env.Kubeconfig, img, tag, 20*time.Second)
	killed := time.Now()
	box, err := v.Connect(t.Context(), id)
	if err != nil {
		t.Fatalf("the box right after its caller's end: %v", err)
	}
	t.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(t.Context())) })
	info, err := box.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, time.Until(info.Deadline)+20*time.Second, "the cluster to remove the box", func() bool {
		_, err := v.Connect(t.Context(), id)
		return errors.Is(err, vendors.ErrNotFound)
	})
	gone := time.Now()
	if gone.Before(info.Deadline) {
		t.Errorf("the box went at %v, before its deadline %v", gone, info.Deadline)
	}
	t.Logf("removed %v after the kill, %v after its deadline", gone.Sub(killed).Round(time.Millisecond), gone.Sub(info.Deadline).Round(time.Millisecond))
	pods := clientset(t).CoreV1().Pods(v.Namespace())
	polltest.Until(t, 30*time.Second, "the box's pod to go", func() bool {
		_, err := pods.Get(t.Context(), box.(*kubernetes.Box).Pod(), metav1.GetOptions{})
		return err != nil
	})
}

// TestVendor_WarmPool: with a pool of two, Create claims a running
// Sandbox of the pool (its name and its pod's are the pool's), labels the
// box like any other, and Destroy removes the claim too; the pool refills.
func TestVendor_WarmPool(t *testing.T) {
	t.Parallel()
	img := kubetest.Image(t, boxtest.Options{})
	pool := "vt-pool-" + strings.ToLower(vendortest.RunTag(t)[3:])
	v := kubetest.Vendor(t, kubernetes.WithWarmPool(pool))
	if err := v.EnsurePool(t.Context(), vendors.PoolSpec{Name: pool, Image: img, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.DeletePool(context.WithoutCancel(t.Context()), pool) })
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := v.WaitPool(ctx, pool); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	box := create(t, v, vendors.CreateSpec{Image: img, Ports: []int{8080}})
	t.Logf("claimed in %v", time.Since(start).Round(time.Millisecond))
	kb := box.(*kubernetes.Box)
	if !strings.HasPrefix(kb.Pod(), pool+"-") {
		t.Errorf("pod %s is not one of the pool's", kb.Pod())
	}
	sb := kubetest.Sandbox(t, box.ID())
	if got := sb.Labels[agentsv1.SandboxLaunchTypeLabel]; got != agentsv1.SandboxLaunchTypeWarm {
		t.Errorf("the claimed Sandbox's launch type is %q, want %q", got, agentsv1.SandboxLaunchTypeWarm)
	}
	claim := metav1.GetControllerOf(sb)
	if claim == nil || claim.Kind != "SandboxClaim" {
		t.Fatalf("the claimed Sandbox's controller is %+v, want its SandboxClaim", claim)
	}
	info, err := box.Status(t.Context())
	if err != nil || info.State != vendors.StateRunning {
		t.Fatalf("Status = %+v, %v", info, err)
	}
	if list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: info.RunTag()}); err != nil || len(list) != 1 {
		t.Errorf("List(run tag) = %v, %v; want the claimed box", list, err)
	}
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"echo", "warm"}})
	if err != nil || string(res.Stdout) != "warm\n" {
		t.Errorf("Exec = %v %q", err, res.Stdout)
	}
	// A spec the pool cannot serve gets a Sandbox of its own.
	cold := create(t, v, vendors.CreateSpec{Image: img, Env: map[string]string{"A": "b"}})
	if p := cold.(*kubernetes.Box).Pod(); p != cold.ID() {
		t.Errorf("a box with its own environment runs in pod %s, want its own", p)
	}
	if err := box.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	claims := kubetest.Kubectl(t, "get", "sandboxclaims", "-o", "name", "--ignore-not-found")
	if strings.Contains(string(claims), "/"+claim.Name+"\n") {
		t.Errorf("the claim %s remains after Destroy", claim.Name)
	}
	if _, err := v.Connect(t.Context(), box.ID()); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect after Destroy = %v", err)
	}
	refill, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := v.WaitPool(refill, pool); err != nil {
		t.Errorf("the pool did not refill: %v", err)
	}

	// Recycling past the maximum age: a young pool keeps its boxes; an old
	// one loses its oldest (one of two per call), which the controller
	// replaces.
	before, err := v.PoolState(t.Context(), pool)
	if err != nil || before.Want != 2 || before.Ready != 2 {
		t.Fatalf("PoolState = %+v, %v; want 2 of 2 ready", before, err)
	}
	if n, err := v.RecyclePool(t.Context(), pool, time.Hour); err != nil || n != 0 {
		t.Errorf("RecyclePool(1h) of a young pool = %d, %v; want none", n, err)
	}
	if n, err := v.RecyclePool(t.Context(), pool, 0); err != nil || n != 1 {
		t.Errorf("RecyclePool(0) = %d, %v; want its oldest box", n, err)
	}
	polltest.Until(t, 3*time.Minute, "the recycled box's replacement", func() bool {
		st, err := v.PoolState(t.Context(), pool)
		return err == nil && st.Ready == 2 && st.Oldest.After(before.Oldest)
	})
}

// TestVendor_UnknownRuntime: a RuntimeClass the cluster lacks fails the
// create at once with the controller's reason, and nothing is left.
func TestVendor_UnknownRuntime(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	img := kubetest.Image(t, boxtest.Options{})
	tag := vendortest.RunTag(t)
	start := time.Now()
	_, err := v.Create(t.Context(), vendors.CreateSpec{Image: img, Lifetime: time.Minute, RunTag: tag, Runtime: "no-such-runtime"})
	var nr *kubernetes.NotReadyError
	if !errors.As(err, &nr) || !strings.Contains(nr.Message, "no-such-runtime") {
		t.Fatalf("Create(unknown runtime) = %v, want a NotReadyError naming the RuntimeClass", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the refusal took %v", took)
	}
	if list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag}); err != nil || len(list) != 0 {
		t.Errorf("List(run tag) after the failed create = %v, %v; want none", list, err)
	}
}

// TestVendor_GVisorRuntimeClass: a gVisor box asks for the RuntimeClass
// named gvisor, and the pod the API server stores carries it. This is all
// the test bed can show: its containerd has no runsc handler (gVisor's
// containerd shim sets an OOM score, which needs CAP_SYS_RESOURCE here),
// so the pod never starts; the create is cut short and leaves nothing.
func TestVendor_GVisorRuntimeClass(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	img := kubetest.Image(t, boxtest.Options{})
	cs := clientset(t)
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: vendors.RuntimeGVisor}, Handler: "runsc"}
	if _, err := cs.NodeV1().RuntimeClasses().Create(t.Context(), rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tag := vendortest.RunTag(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := v.Create(ctx, vendors.CreateSpec{Image: img, Lifetime: time.Minute, RunTag: tag, Runtime: vendors.RuntimeGVisor})
		done <- err
	}()
	var class string
	polltest.UntilNil(t, 2*time.Minute, "the box's pod in the API server", func() error {
		pods, err := cs.CoreV1().Pods(v.Namespace()).List(t.Context(), metav1.ListOptions{LabelSelector: boxmeta.LabelRunTag + "=" + tag})
		if err != nil || len(pods.Items) == 0 {
			return fmt.Errorf("no pod yet (%v)", err)
		}
		if p := pods.Items[0].Spec.RuntimeClassName; p != nil {
			class = *p
		}
		return nil
	})
	if class != vendors.RuntimeGVisor {
		t.Errorf("the stored pod's runtimeClassName = %q, want %q", class, vendors.RuntimeGVisor)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a box under a RuntimeClass the node cannot run became ready")
	}
	polltest.UntilNil(t, 2*time.Minute, "no box of the cut create left", func() error {
		list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag})
		if err != nil || len(list) != 0 {
			return fmt.Errorf("List = %v, %v", list, err)
		}
		return nil
	})
}

// TestVendor_EndpointAfterRefusals: connections the pod refuses (nothing
// listens yet) do not break the forward: once a server listens, requests
// go through the same local address, also while another stays open.
func TestVendor_EndpointAfterRefusals(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	box := create(t, v, vendors.CreateSpec{Image: kubetest.Image(t, boxtest.Options{}), Ports: []int{8080}})
	ep, err := box.Endpoint(t.Context(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	client := ep.Client()
	get := func(path string) (string, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ep.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for range 3 {
		if _, err := get("/"); err == nil {
			t.Fatal("a request answered before any server listened")
		}
	}
	if _, err := box.Spawn(t.Context(), vendors.SpawnSpec{Command: []string{"node", "-e",
		`require("http").createServer((q, s) => { if (q.url === "/slow") { s.write("a"); setTimeout(() => s.end("b"), 3000) } else s.end("ok") }).listen(8080)`}}); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 30*time.Second, "the server to answer", func() bool { b, err := get("/"); return err == nil && b == "ok" })
	slow := make(chan string, 1)
	go func() { b, err := get("/slow"); slow <- fmt.Sprint(b, err) }()
	for range 5 {
		if b, err := get("/"); err != nil || b != "ok" {
			t.Errorf("GET / beside a slow one = %q, %v", b, err)
		}
	}
	if got := <-slow; got != "ab<nil>" {
		t.Errorf("GET /slow = %s", got)
	}
}
