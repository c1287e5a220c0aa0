package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/brokerkube"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/brokertls"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/open"
)

// TestKubernetes_ClusterBroker runs the credential broker in the test
// bed's cluster as a user would: boxctl broker image pushes an image of
// the static boxctl, boxctl broker certs makes the admin API's mutual TLS
// (the admin Service's address among the names), boxctl broker manifest
// runs it behind its Services with the Router's key from a Secret, and
// boxctl up with $BOXCTL_BROKER_ADMIN makes an open box and a confined
// one whose turns reach the Router through it (the Router takes only
// the real key). The key is in no pod spec, no box process, no output and
// not in the broker's log; ls shows what the broker measured; a client of
// another CA is refused.
func TestKubernetes_ClusterBroker(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("KUBECONFIG", env.Kubeconfig)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	useState(t)
	kv := kubetest.Vendor(t)
	cleanupState(t, kv)
	tr := &transcript{}
	img := kubetest.Image(t, boxtest.Options{})

	// The Router: a stub on this machine where the cluster's pods reach
	// it, taking only the real key.
	dv, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork("boxctl-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dv.Close() })
	key := localrouter.NewKey()
	const reply = "The Router answered through the cluster's broker."
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: routerstub.ScriptFunc(func(routerstub.Request) routerstub.Reply {
		return routerstub.Text(reply)
	})})
	if err != nil {
		t.Fatal(err)
	}
	routerURL := serveRouterStub(t, dv, stub)

	ns := "bxt-broker-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	kubetest.Kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() { kubetest.Kubectl(t, "delete", "namespace", ns, "--wait=false") })

	r := boxctl(t, t.Context(), tr, "broker", "image", "--push", env.Registry+"/boxctl-test/broker:"+ns,
		"--binary", boxbridgetest.Binary(t, "cmd/boxctl", "boxctl"), "-o", "json")
	var pushed struct{ Image string }
	if err := json.Unmarshal([]byte(r.stdout), &pushed); r.code != 0 || err != nil || !strings.Contains(pushed.Image, "@sha256:") {
		t.Fatalf("broker image: exit %d (%v), %q", r.code, r.err, r.stdout)
	}
	r = boxctl(t, t.Context(), tr, "broker", "manifest", "--namespace", ns, "--image", pushed.Image, "--keys-secret", "model-keys")
	if r.code != 0 {
		t.Fatalf("broker manifest: exit %d: %v", r.code, r.err)
	}
	manifest := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(manifest, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	kubetest.Kubectl(t, "apply", "-f", manifest)
	adminIP := string(kubetest.Kubectl(t, "-n", ns, "get", "service", brokerkube.AdminName, "-o", "jsonpath={.spec.clusterIP}"))
	certs := filepath.Join(t.TempDir(), "certs")
	if r := boxctl(t, t.Context(), tr, "broker", "certs", certs, "--namespace", ns, "--host", adminIP); r.code != 0 {
		t.Fatalf("broker certs: exit %d: %v", r.code, r.err)
	}
	kubetest.Kubectl(t, "-n", ns, "create", "secret", "generic", "boxctl-broker-tls", "--from-file="+filepath.Join(certs, brokertls.Server))
	kubetest.Kubectl(t, "-n", ns, "create", "secret", "generic", "model-keys", "--from-literal=TANGLE_ROUTER_URL="+routerURL,
		"--from-literal=TANGLE_API_KEY="+key)
	kubetest.Kubectl(t, "-n", ns, "rollout", "status", "deployment/"+brokerkube.Name, "--timeout=180s")

	adminURL := "https://" + adminIP + ":" + strconv.Itoa(brokerkube.AdminPort)
	t.Setenv(brokerAdminEnv, adminURL)
	t.Setenv(brokerCertsEnv, filepath.Join(certs, brokertls.Client))
	// The Service leads to the pod once kube-proxy has its endpoint.
	bc, err := remoteBroker(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	polltest.UntilNil(t, 60*time.Second, "the broker's admin API through its Service", func() error {
		_, err := bc.Status(t.Context())
		return err
	})
	// The key came from the Secret: the broker holds the Router before
	// any up gave it.
	if st, err := bc.Status(t.Context()); err != nil || len(st.Upstreams) != 1 || st.Upstreams[0] != upstreamName(broker.Router, routerURL, false) {
		t.Errorf("the broker's upstreams at its start = %+v, %v; want the Router of its Secret", st.Upstreams, err)
	}
	bc.Close()
	t.Setenv(open.EnvKubeBrokerService, ns+"/"+brokerkube.Name)
	t.Setenv(open.EnvKubeEgressRelay, kubetest.FreeRelay(t).String())
	t.Setenv(routerURLEnv, routerURL)
	t.Setenv(routerKeyVar, key)

	var ids []string
	for _, mode := range []string{"open", "deny"} {
		r := boxctl(t, t.Context(), tr, "up", "--target", "kubernetes", "--image", img, "--egress", mode, "--lifetime", "10m", "-o", "json")
		var up upResult
		if err := json.Unmarshal([]byte(r.stdout), &up); r.code != 0 || err != nil {
			t.Fatalf("up --egress %s: exit %d (%v), %q", mode, r.code, r.err, r.stdout)
		}
		ids = append(ids, up.ID)
		if r := boxctl(t, t.Context(), tr, "turn", up.ID, "Hello through the cluster's broker"); r.code != 0 || !strings.Contains(r.stdout, reply) {
			t.Fatalf("turn in the %s box: exit %d (%v), %q; want the Router's reply", mode, r.code, r.err, r.stdout)
		}
		procs := boxctl(t, t.Context(), tr, "exec", up.ID, "--", "sh", "-c", `cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n'`)
		if procs.code != 0 || !strings.Contains(procs.stdout, "box-bridge") {
			t.Errorf("the %s box's processes: exit %d, %d bytes; want the bridge's among them", mode, procs.code, len(procs.stdout))
		}
		for what, text := range map[string]string{
			"processes": procs.stdout,
			"Sandbox":   string(kubetest.Kubectl(t, "get", "sandbox/"+up.ID, "-o", "yaml")),
			"pods":      string(kubetest.Kubectl(t, "get", "pods", "-o", "yaml")),
		} {
			if strings.Contains(text, key) {
				t.Errorf("the Router's key is in the %s box's %s", mode, what)
			}
		}
	}
	if np := string(kubetest.Kubectl(t, "get", "networkpolicy/"+ids[1], "-o", "jsonpath={.spec.egress[*].to[*].podSelector.matchLabels}")); !strings.Contains(np, brokerkube.Name) {
		t.Errorf("the confined box's NetworkPolicy selects %q, want the broker's pods", np)
	}

	// The broker measured each box's turn; ls reads it over the admin API.
	r = boxctl(t, t.Context(), tr, "ls", "--target", "kubernetes", "-o", "json")
	var rows []boxstate.Row
	if err := json.Unmarshal([]byte(r.stdout), &rows); r.code != 0 || err != nil {
		t.Fatalf("ls: exit %d (%v), %q", r.code, r.err, r.stdout)
	}
	for _, row := range rows {
		if row.Usage == nil || row.Usage.Requests < 1 {
			t.Errorf("ls row of %s: usage %+v, want the broker's count", row.ID, row.Usage)
		}
	}

	// A client with a certificate of another CA (that trusts the
	// broker's) is refused in the handshake.
	other := filepath.Join(t.TempDir(), "other")
	if err := brokertls.Write(other, []string{adminIP}, time.Hour); err != nil {
		t.Fatal(err)
	}
	conf, err := brokertls.ClientConfig(filepath.Join(other, brokertls.Client))
	if err != nil {
		t.Fatal(err)
	}
	mine, err := brokertls.ClientConfig(filepath.Join(certs, brokertls.Client))
	if err != nil {
		t.Fatal(err)
	}
	conf.RootCAs = mine.RootCAs
	foreign, err := broker.DialTLS(adminURL, conf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := foreign.Status(t.Context()); err == nil {
		t.Error("a client of another CA was answered")
	}
	foreign.Close()

	for _, id := range ids {
		if r := boxctl(t, t.Context(), tr, "rm", "--target", "kubernetes", id); r.code != 0 {
			t.Errorf("rm %s: exit %d: %v", id, r.code, r.err)
		}
	}
	polltest.Until(t, 60*time.Second, "the boxes to be gone", func() bool { return boxGone(t, kv, ids[0]) && boxGone(t, kv, ids[1]) })
	if logs := string(kubetest.Kubectl(t, "-n", ns, "logs", "deployment/"+brokerkube.Name)); strings.Contains(logs, key) || !strings.Contains(logs, "broker admin API") {
		t.Errorf("the broker's log holds the key, or not its start:\n%s", logs)
	}
	tr.noSecrets(t, map[string]string{"router key": key})
}
