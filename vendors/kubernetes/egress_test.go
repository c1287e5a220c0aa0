package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// sh runs script in box as its user and returns its output.
func sh(t *testing.T, box vendors.Box, script string) string {
	t.Helper()
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", script + " 2>&1; true"}})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// connect is a script that connects to $H:$P, sends a line and prints
// what came back, or the error.
const connect = `node -e 'const s=require("net").connect(+process.env.P,process.env.H);s.setTimeout(3000,()=>{console.log("timeout");process.exit(0)});s.on("connect",()=>s.write("hello\n"));s.on("data",d=>{console.log("data "+d);process.exit(0)});s.on("error",e=>{console.log("error "+e.code);process.exit(0)})'`

func connectTo(t *testing.T, box vendors.Box, host string, port int) string {
	t.Helper()
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", connect}, Env: map[string]string{"H": host, "P": strconv.Itoa(port)}})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// TestVendor_EgressConfined: the cluster is a real one (kube-proxy, CoreDNS
// and a NetworkPolicy enforcer): an open box reaches another box's pod by
// a Service's name and address; a box created with an egress policy gets
// a NetworkPolicy of its own, asks the relay for names, and reaches
// neither the Service, the pod, the cluster's DNS nor an address its
// policy does not name, while one it names (with its port) is reached.
// Its policy changes on the running box, and it takes no connection in.
// The policy goes with the box.
func TestVendor_EgressConfined(t *testing.T) {
	t.Parallel()
	g := kubetest.EgressGate(t, gate.Options{})
	v := kubetest.Vendor(t, kubernetes.WithEgressRelay(g.Address()))
	img := kubetest.Image(t, boxtest.Options{})
	if !v.Supports()[vendors.FieldEgress] || kubetest.Vendor(t).Supports()[vendors.FieldEgress] {
		t.Fatal("Supports()[egress]: want it with a relay, and only then")
	}

	// A server box, and a Service of its pod.
	server := create(t, v, vendors.CreateSpec{Image: img})
	serverPod, err := clientset(t).CoreV1().Pods(v.Namespace()).Get(t.Context(), server.(*kubernetes.Box).Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Spawn(t.Context(), vendors.SpawnSpec{Name: "echo", Command: []string{"node", "-e",
		`require("net").createServer(s=>s.on("data",d=>{require("fs").appendFileSync("/tmp/got",d);s.end("pong")})).listen(9000)`}}); err != nil {
		t.Fatal(err)
	}
	svcName := "bxt-" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano(), 36))
	svc, err := clientset(t).CoreV1().Services(v.Namespace()).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"bxt-service": svcName},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(9000), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = clientset(t).CoreV1().Services(v.Namespace()).Delete(t.Context(), svcName, metav1.DeleteOptions{})
	})
	serverPod.Labels["bxt-service"] = svcName
	if _, err := clientset(t).CoreV1().Pods(v.Namespace()).Update(t.Context(), serverPod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fqdn := svcName + "." + v.Namespace() + ".svc.cluster.local"

	// An open box: cluster DNS answers the Service's name with its
	// address, and kube-proxy leads that to the server's pod.
	open := create(t, v, vendors.CreateSpec{Image: img})
	polltest.UntilNil(t, 30*time.Second, "the Service reached by name from an open box", func() error {
		if out := connectTo(t, open, fqdn, 80); out != "data pong" {
			return errors.New(out)
		}
		return nil
	})
	if out := sh(t, open, "getent hosts "+fqdn); !strings.HasPrefix(out, svc.Spec.ClusterIP+" ") {
		t.Errorf("getent hosts %s = %q, want its ClusterIP %s", fqdn, out, svc.Spec.ClusterIP)
	}
	served := sh(t, server, "wc -c < /tmp/got")

	// A confined box, allowed one address on one port: the open box's
	// pod, port 9001.
	openAddr, err := open.(vendors.Addressed).Address(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Spawn(t.Context(), vendors.SpawnSpec{Name: "allowed", Command: []string{"node", "-e",
		`for(const p of [9001,9002])require("net").createServer(s=>s.end("open"+p)).listen(p)`}}); err != nil {
		t.Fatal(err)
	}
	pol, err := egress.Parse(netip.AddrPortFrom(openAddr, 9001).String())
	if err != nil {
		t.Fatal(err)
	}
	confined := create(t, v, vendors.CreateSpec{Image: img, Egress: &pol})
	cb := confined.(*kubernetes.Box)
	if _, err := cb.NetworkPolicy(t.Context()); err != nil {
		t.Fatalf("the confined box's NetworkPolicy: %v", err)
	}
	if out := sh(t, confined, "cat /etc/resolv.conf"); !strings.Contains(out, "nameserver "+g.Address().String()) {
		t.Errorf("the confined box's resolv.conf = %q, want the relay %s", out, g.Address())
	}
	polltest.UntilNil(t, 30*time.Second, "the allowed address reached from the confined box", func() error {
		if out := connectTo(t, confined, openAddr.String(), 9001); out != "data open9001" {
			return errors.New(out)
		}
		return nil
	})
	serverAddr := netip.MustParseAddr(serverPod.Status.PodIP)
	for _, c := range []struct {
		what string
		host string
		port int
	}{
		{"the allowed address, another port", openAddr.String(), 9002},
		{"another box's pod", serverAddr.String(), 9000},
		{"the Service's address", svc.Spec.ClusterIP, 80},
		{"the cluster's DNS (TCP)", "10.96.0.10", 53},
	} {
		if out := connectTo(t, confined, c.host, c.port); strings.HasPrefix(out, "data") {
			t.Errorf("the confined box reached %s (%s:%d): %q", c.what, c.host, c.port, out)
		}
	}
	if out := sh(t, confined, "getent hosts "+fqdn+" || echo none"); out != "none" {
		t.Errorf("the confined box resolved %s: %q", fqdn, out)
	}
	if got := sh(t, server, "wc -c < /tmp/got"); got != served {
		t.Errorf("the server saw %s bytes, want only the open box's %s", got, served)
	}

	// Nothing comes in: the open box cannot reach a server in it.
	if _, err := confined.Spawn(t.Context(), vendors.SpawnSpec{Name: "in", Command: []string{"node", "-e",
		`require("net").createServer(s=>s.end("in")).listen(9003)`}}); err != nil {
		t.Fatal(err)
	}
	confinedAddr, err := confined.(vendors.Addressed).Address(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	polltest.UntilNil(t, 10*time.Second, "the confined box's own server to listen", func() error {
		if out := connectTo(t, confined, "127.0.0.1", 9003); out != "data in" {
			return errors.New(out)
		}
		return nil
	})
	if out := connectTo(t, open, confinedAddr.String(), 9003); strings.HasPrefix(out, "data") {
		t.Errorf("the open box reached the confined one: %q", out)
	}

	// A vendor that knows the broker runs behind the Service: its
	// confined boxes reach the Service's pods through the Service's
	// address (a NetworkPolicy sees the pod's address, after kube-proxy's
	// translation), where the box above could not.
	bv := kubetest.Vendor(t, kubernetes.WithEgressRelay(g.Address()), kubernetes.WithBrokerService(v.Namespace(), svcName))
	brokered := create(t, bv, vendors.CreateSpec{Image: img, Egress: &pol})
	polltest.UntilNil(t, 30*time.Second, "the broker's Service reached from a confined box", func() error {
		if out := connectTo(t, brokered, svc.Spec.ClusterIP, 80); out != "data pong" {
			return errors.New(out)
		}
		return nil
	})
	if out := connectTo(t, brokered, "10.96.0.10", 53); strings.HasPrefix(out, "data") {
		t.Errorf("the brokered box reached the cluster's DNS: %q", out)
	}
	_ = brokered.Destroy(t.Context())

	// A change on the running box: the other port, not the first.
	moved, err := egress.Parse(netip.AddrPortFrom(openAddr, 9002).String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cb.SetEgress(t.Context(), moved); err != nil {
		t.Fatal(err)
	}
	polltest.UntilNil(t, 10*time.Second, "the change to hold", func() error {
		a, b := connectTo(t, confined, openAddr.String(), 9002), connectTo(t, confined, openAddr.String(), 9001)
		if a != "data open9002" || strings.HasPrefix(b, "data") {
			return fmt.Errorf("9002: %q, 9001: %q", a, b)
		}
		return nil
	})
	t.Logf("an address rule's change held within %v (the NetworkPolicy's update and the enforcer's sync)", time.Since(start).Round(time.Millisecond))
	if err := cb.SetEgress(t.Context(), egress.Policy{Open: true}); err == nil {
		t.Error("SetEgress(open) on a confined box: no error")
	}
	var nf *vendors.NotFoundError
	if err := open.(*kubernetes.Box).SetEgress(t.Context(), moved); !errors.As(err, &nf) {
		t.Errorf("SetEgress on a box created open = %v, want a not-found error", err)
	}

	// The policy goes with the box.
	if err := confined.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.NetworkPolicy(t.Context()); !errors.As(err, &nf) {
		t.Errorf("the NetworkPolicy after Destroy: %v, want not found", err)
	}
}

// TestVendor_EgressRefused: a policy without a relay is refused before any
// call, typed.
func TestVendor_EgressRefused(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	pol := egress.Policy{}
	var u *vendors.UnsupportedError
	if _, err := v.Create(t.Context(), vendors.CreateSpec{Image: "x", RunTag: "bxt-refused", Lifetime: time.Minute, Egress: &pol}); !errors.As(err, &u) || u.Field != vendors.FieldEgress {
		t.Errorf("Create with a policy and no relay = %v, want UnsupportedError for egress", err)
	}
	// A broker's Service that does not exist fails the create before
	// anything is made.
	bv := kubetest.Vendor(t, kubernetes.WithEgressRelay(kubetest.FreeRelay(t)), kubernetes.WithBrokerService(v.Namespace(), "no-such-broker"))
	if _, err := bv.Create(t.Context(), vendors.CreateSpec{Image: "x", RunTag: "bxt-refused", Lifetime: time.Minute, Egress: &pol}); err == nil ||
		!strings.Contains(err.Error(), "no-such-broker") {
		t.Errorf("Create with a missing broker Service = %v, want an error naming it", err)
	}
	// A relay the boxes must never be let reach is refused.
	for _, a := range []string{"169.254.169.254", "127.0.0.1", "0.0.0.0", "::1", "224.0.0.1"} {
		if _, err := kubernetes.New(kubernetes.WithRESTConfig(adminConfig(t)), kubernetes.WithEgressRelay(netip.MustParseAddr(a))); err == nil {
			t.Errorf("WithEgressRelay(%s): no error", a)
		}
	}
}

// TestVendor_EgressFork: a fork of a confined box is confined by the same
// rules from its first pod on (a NetworkPolicy of its own, its pod
// labelled for it), and every confined pod is under the baseline policy
// that denies a labelled pod whatever its own policy's state.
func TestVendor_EgressFork(t *testing.T) {
	t.Parallel()
	g := kubetest.EgressGate(t, gate.Options{})
	v := kubetest.Vendor(t, kubernetes.WithEgressRelay(g.Address()))
	img := kubetest.Image(t, boxtest.Options{})
	pol, err := egress.Parse("192.0.2.9:5432")
	if err != nil {
		t.Fatal(err)
	}
	box := create(t, v, vendors.CreateSpec{Image: img, Retention: time.Hour, Egress: &pol})
	if _, err := v.Suspend(t.Context(), box.ID()); err != nil {
		t.Fatal(err)
	}
	ids, err := v.Fork(t.Context(), box.ID(), 1)
	if err != nil {
		t.Fatal(err)
	}
	fork, err := v.Resume(t.Context(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fork.Destroy(context.WithoutCancel(t.Context())) })
	blocks, err := fork.(vendors.EgressBlocks).EgressBlocks(t.Context())
	if err != nil {
		t.Fatalf("the fork's NetworkPolicy: %v", err)
	}
	var cidrs []string
	for _, b := range blocks {
		cidrs = append(cidrs, b.Prefix.String())
	}
	if !slices.Contains(cidrs, "192.0.2.9/32") || !slices.Contains(cidrs, g.Address().String()+"/32") {
		t.Errorf("the fork may reach %v, want the source's rules", cidrs)
	}
	pod, err := clientset(t).CoreV1().Pods(v.Namespace()).Get(t.Context(), fork.(*kubernetes.Box).Pod(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[kubernetes.LabelEgressBox] != fork.ID() {
		t.Errorf("the fork's pod is labelled %q for its policy, want %s", pod.Labels[kubernetes.LabelEgressBox], fork.ID())
	}
	base, err := clientset(t).NetworkingV1().NetworkPolicies(v.Namespace()).Get(t.Context(), kubernetes.BaselinePolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Spec.Egress) != 0 || len(base.Spec.Ingress) != 0 || len(base.Spec.PolicyTypes) != 2 ||
		len(base.Spec.PodSelector.MatchExpressions) != 1 || base.Spec.PodSelector.MatchExpressions[0].Key != kubernetes.LabelEgressBox {
		t.Errorf("the baseline policy = %+v, want every labelled pod denied in and out", base.Spec)
	}
}
