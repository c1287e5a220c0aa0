package pool_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// kubeStandbyPool makes a standby warm pool of size pods of the Claude
// Code harness on the test bed's cluster, full when it returns, and a
// provider whose Create claims from it; both go at the end of t.
func kubeStandbyPool(t testing.TB, f *fixture, size int32) (*sandbox.Provider, *kubernetes.Vendor, string) {
	t.Helper()
	name := "sb-" + randText()[:8]
	kv := kubetest.Vendor(t, kubernetes.WithWarmPool(name))
	img := kubetest.Image(t, boxtest.Options{})
	p := f.On(t, target{Name: "kubernetes", Vendor: kv, Image: img}, nil)
	env, err := p.StandbyEnv(claude.Harness)
	if err != nil {
		t.Fatal(err)
	}
	spec := vendors.PoolSpec{Name: name, Image: img, Replicas: size,
		Standby: &vendors.PoolStandby{Harness: claude.Harness, Port: sandbox.BridgePort, Env: env, Dir: sandbox.Workspace}}
	if err := kv.EnsurePool(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kv.DeletePool(context.Background(), name) })
	waitKubePool(t, kv, name)
	return p, kv, name
}

// waitKubePool waits until every pod of the pool is ready.
func waitKubePool(t testing.TB, kv *kubernetes.Vendor, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := kv.WaitPool(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// kubePoolConfig is the API server's JSON of the pool's template and
// pods, and of the box's Sandbox and pod when box is set.
func kubePoolConfig(t *testing.T, name string, box vendors.Box) string {
	t.Helper()
	out := kubetest.Kubectl(t, "get", "sandboxtemplate/"+name, "sandboxwarmpool/"+name, "-o", "json")
	pods := kubetest.Kubectl(t, "get", "pods", "-o", "json")
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(pods, &l); err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if bytes.Contains(p, []byte(`"name":"`+name+`-`)) {
			out = append(out, p...)
		}
	}
	if box != nil {
		out = append(out, kubetest.Describe(t, box)...)
	}
	return string(out)
}

// TestProvider_KubernetesStandbyPool: a Create on a vendor with a standby
// warm pool claims one of its pods with no exec (agent-sandbox's claim,
// then one claim request to the bridge that runs since the pod's start);
// no secret of the claim, nor the pool token, is in the template, the
// pods or the Sandbox before or after; the deadline moved to the claim's;
// a turn runs; the box's bridge refuses a second claim with the token.
func TestProvider_KubernetesStandbyPool(t *testing.T) {
	f := setup(t)
	p, kv, name := kubeStandbyPool(t, f, 2)
	raw := kubetest.Kubectl(t, "get", "secret/"+kubernetes.StandbySecret(name), "-o", "jsonpath={.data."+kubernetes.StandbyTokenKey+"}")
	token, err := base64.StdEncoding.DecodeString(string(raw))
	if err != nil || len(token) < 32 {
		t.Fatalf("pool token %q: %v", raw, err)
	}
	before := kubePoolConfig(t, name, nil)
	if !strings.Contains(before, "box-bridge --standby") {
		t.Fatalf("the pool's pods do not run the standby bridge:\n%s", before)
	}
	if strings.Contains(before, string(token)) {
		t.Error("the pool token is in the pool's template or pods")
	}
	secrets := map[string]string{}
	for j := range 5 {
		secrets[fmt.Sprintf("SECRET_%d", j)] = "secret-" + randText()
	}
	start := time.Now()
	env, err := p.Create(t.Context(), sandbox.CreateRequest{Profile: claude, Env: secrets, Labels: map[string]string{"claim": "one"}, Lifetime: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claimed in %v: %v", time.Since(start).Round(time.Microsecond), env.Timings())
	t.Cleanup(func() { _ = env.Destroy(context.Background()) })
	var phases []string
	for _, ph := range env.Timings() {
		phases = append(phases, ph.Name)
	}
	if want := []string{sandbox.PhaseChecks, sandbox.PhaseVendorClaim, sandbox.PhaseClaim, sandbox.PhaseAttach}; !slices.Equal(phases, want) {
		t.Errorf("phases %v, want %v", phases, want)
	}
	box := env.Box()
	if pod := box.(*kubernetes.Box).Pod(); !strings.HasPrefix(pod, name+"-") {
		t.Errorf("box %s runs in pod %s, not one of the pool's", box.ID(), pod)
	}
	ref := env.Reference()
	if left := time.Until(ref.Deadline); left <= 4*time.Minute || left > 5*time.Minute+2*time.Second {
		t.Errorf("deadline is %v away, want the claim's 5m from now", left)
	}
	info, err := box.Status(t.Context())
	if err != nil || info.Deadline.Sub(ref.Deadline).Abs() > 2*time.Second {
		t.Errorf("the Sandbox ends at %v (%v), want the claim's deadline %v", info.Deadline, err, ref.Deadline)
	}
	got, err := box.Read(t.Context(), "/tmp/.boxctl/deadline")
	if err != nil || strings.TrimSpace(string(got)) != fmt.Sprint(ref.Deadline.Unix()) {
		t.Errorf("box-init's deadline file = %q, %v; want %d", got, err, ref.Deadline.Unix())
	}
	if res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "ls -A /run/boxctl-pool; cat /run/boxctl-pool-secret/* 2>/dev/null; true"}}); err != nil || len(bytes.TrimSpace(res.Stdout)) != 0 {
		t.Errorf("the box can still read a pool token: %q, %v", res.Stdout, err)
	}
	text, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."})
	if err != nil || !strings.Contains(text, sandboxtest.ReplyText) {
		t.Errorf("turn in a claimed box = %q, %v", text, err)
	}
	after := kubePoolConfig(t, name, box)
	for what, s := range map[string]string{"bearer": ref.Bearer, "router key": f.Router.Key, "pool token": string(token)} {
		if strings.Contains(before, s) || strings.Contains(after, s) {
			t.Errorf("the %s is in the API server's objects or audit log", what)
		}
	}
	for k, s := range secrets {
		if strings.Contains(before, s) || strings.Contains(after, s) {
			t.Errorf("%s is in the API server's objects or audit log", k)
		}
	}
	// Nor anywhere in the audit log, the Secret's creation and reads
	// included.
	audit, err := os.ReadFile(testbed.Require(t).KubeAuditLog)
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]string{"bearer": ref.Bearer, "router key": f.Router.Key, "pool token": string(token),
		"pool token in base64": string(raw), "SECRET_0": secrets["SECRET_0"]} {
		if bytes.Contains(audit, []byte(s)) {
			t.Errorf("the %s is in the API server's audit log", what)
		}
	}
	// A second claim of the claimed box, with the pool token, is refused.
	ep, err := box.Endpoint(t.Context(), sandbox.BridgePort)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(wire.Claim{Bearer: strings.Repeat("ab", 32), RouterURL: "http://127.0.0.1:1", RouterKey: "k", Deadline: time.Now().Add(time.Hour).Unix()})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ep.URL+wire.PathClaim, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := ep.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e wire.ErrorResponse
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || e.Error.Type != wire.TypeAlreadyClaimed {
		t.Errorf("a second claim = %d %s, want 409 %s", resp.StatusCode, e.Error.Type, wire.TypeAlreadyClaimed)
	}
	// The claimed box's bridge keeps the claim's bearer.
	if text, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."}); err != nil || !strings.Contains(text, sandboxtest.ReplyText) {
		t.Errorf("turn after the refused claim = %q, %v", text, err)
	}
	// Another Create gets the other pod.
	env2, err := p.Create(t.Context(), sandbox.CreateRequest{Profile: claude, Lifetime: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env2.Destroy(context.Background()) })
	if env2.Box().ID() == box.ID() || env2.Box().(*kubernetes.Box).Pod() == box.(*kubernetes.Box).Pod() {
		t.Errorf("two creates got the same box %s", box.ID())
	}
	img := kubetest.Image(t, boxtest.Options{})
	// The vendor's own Create never takes a standby pod (its bridge
	// would clash with the one a create starts), nor does a claim for
	// another harness.
	plain, err := kv.Create(t.Context(), vendors.CreateSpec{Image: img, Lifetime: time.Minute, RunTag: p.RunTag()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Destroy(context.Background()) })
	if pod := plain.(*kubernetes.Box).Pod(); pod != plain.ID() {
		t.Errorf("a plain create runs in pod %s, not its own", pod)
	}
	if _, _, ok, err := kv.ClaimStandby(t.Context(), vendors.CreateSpec{Image: img, Lifetime: time.Minute, RunTag: p.RunTag()}, "another-harness"); ok || err != nil {
		t.Errorf("ClaimStandby(another harness) = %v, %v; want no claim", ok, err)
	}
	if err := kv.DeletePool(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	if out := kubetest.Kubectl(t, "get", "secret/"+kubernetes.StandbySecret(name), "--ignore-not-found", "-o", "name"); len(out) != 0 {
		t.Errorf("the pool's Secret remains after DeletePool: %s", out)
	}
}

// TestProvider_KubernetesStandbyPoolAtOnce: creates made at once on a
// standby pool of as many boxes each get a box and a pod of their own
// (agent-sandbox's adoption is a conditional write of the Sandbox's owner).
func TestProvider_KubernetesStandbyPoolAtOnce(t *testing.T) {
	f := setup(t)
	const n = 4
	p, _, name := kubeStandbyPool(t, f, n)
	envs := make([]*sandbox.Environment, n)
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() {
			e, err := p.Create(t.Context(), sandbox.CreateRequest{Profile: claude, Lifetime: 5 * time.Minute})
			if err != nil {
				t.Errorf("create %d: %v", i, err)
				return
			}
			envs[i] = e
		})
	}
	wg.Wait()
	pods := map[string]bool{}
	for _, e := range envs {
		if e == nil {
			continue
		}
		t.Cleanup(func() { _ = e.Destroy(context.Background()) })
		pod := e.Box().(*kubernetes.Box).Pod()
		if pods[pod] || !strings.HasPrefix(pod, name+"-") {
			t.Errorf("box %s runs in pod %s: taken twice, or not the pool's", e.Box().ID(), pod)
		}
		pods[pod] = true
	}
	for _, e := range envs {
		if e == nil {
			continue
		}
		if text, _, err := sandboxtest.Turn(t.Context(), e, provider.Turn{Prompt: "Say hello."}); err != nil || !strings.Contains(text, sandboxtest.ReplyText) {
			t.Errorf("turn in %s = %q, %v", e.Box().ID(), text, err)
		}
	}
}
