package e2bemu_test

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/jssdk"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/egress/egresstest"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

//go:embed testdata/sdk-network.mjs
var sdkNetwork []byte

// networkRig is an emulator on networks of the test's own (its sandboxes'
// and their confined one, removed after it), with a listener that plays
// the allowed host (TCP on one port, HTTP on 80, under a name the
// emulator's egress resolver knows) and a decoy that must see nothing.
type networkRig struct {
	env             *e2btest.Env
	allowed         netip.AddrPort
	allowedName     string
	decoy           *egresstest.Counter
	allowedTCP, web *egresstest.Counter
}

func newNetworkRig(t *testing.T) *networkRig {
	t.Helper()
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	name := "bxn-" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	// Registered first, so it runs after the emulator's close.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, n := range []string{name + docker.EgressSuffix, name} {
			if err := cli.NetworkRemove(ctx, n); err != nil && !strings.Contains(err.Error(), "not found") {
				t.Errorf("remove network %s: %v", n, err)
			}
		}
	})
	r := &networkRig{allowedName: "allowed.test"}
	allowedIP := egresstest.Network(t, cli, "bxt-allowed-")
	decoyIP := egresstest.Network(t, cli, "bxt-decoy-")
	r.allowedTCP = egresstest.ListenTCP(t, netip.AddrPortFrom(allowedIP, 0).String(), []byte("allowed"))
	r.allowed = r.allowedTCP.Addr
	r.decoy = egresstest.ListenTCP(t, netip.AddrPortFrom(decoyIP, 0).String(), []byte("decoy"))
	l, err := net.Listen("tcp4", netip.AddrPortFrom(allowedIP, 80).String())
	if err != nil {
		t.Fatal(err)
	}
	cl, c := egresstest.Counting(l)
	r.web = c
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "allowed-host-ok") }))
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	resolver := egresstest.StartResolver(t, "127.0.0.1", 0, map[string]netip.Addr{r.allowedName: allowedIP, "other.test": decoyIP})
	r.env = start(t, func(o *e2bemu.Options) {
		o.Network = name
		o.EgressResolver = resolver.NetResolver()
	})
	return r
}

// TestSDK_Network runs the official SDK's network options against the
// emulator (testdata/sdk-network.mjs): allowOut and denyOut on create,
// allowInternetAccess false, and updateNetwork on a running sandbox, each
// enforced on the sandbox's container from outside it. The decoy must
// see no byte, and the allowed host must have been reached.
func TestSDK_Network(t *testing.T) {
	in := jssdk.Require(t, "e2b")
	r := newNetworkRig(t)
	out, err := in.Run(t.Context(), jssdk.RunOptions{Script: sdkNetwork,
		Env: e2bemu.SDKEnv("http://"+r.env.Addr, r.env.Server.Domain(), e2btest.APIKey),
		Args: []string{"box", vendortest.RunTag(t), r.allowed.String(), r.allowedName,
			r.decoy.Addr.String()}})
	if err != nil {
		t.Errorf("script: %v", err)
	}
	if out == nil {
		t.FailNow()
	}
	steps, err := out.Steps()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		t.Run(st.Step, func(t *testing.T) {
			if !st.OK {
				detail, _ := json.Marshal(st.Detail)
				t.Errorf("%s: not the documented result (%.0f ms): %s", st.Step, st.MS, detail)
			}
		})
	}
	const want = 8
	if len(steps) != want || !strings.Contains(string(out.Lines[len(out.Lines)-1]), `"done":true`) {
		t.Errorf("the script ran %d steps, want %d to the end; stderr:\n%s", len(steps), want, out.Stderr)
	}
	if n := r.decoy.Bytes(); n != 0 {
		t.Errorf("%d bytes reached the decoy", n)
	}
	if r.allowedTCP.Bytes() == 0 || r.web.Bytes() == 0 {
		t.Errorf("the allowed host saw %d bytes (TCP) and %d (HTTP), want both reached", r.allowedTCP.Bytes(), r.web.Bytes())
	}
}

// TestNetwork_Refusals: the network route and create refuse what the
// emulator cannot hold, each with E2B's error body and a status that says
// why.
func TestNetwork_Refusals(t *testing.T) {
	r := newNetworkRig(t)
	c := rawClient(r.env)
	base := "http://" + r.env.Addr
	do := func(method, path string, body any) (int, string) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", e2btest.APIKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var e struct {
			Message string `json:"message"`
		}
		_ = json.NewDecoder(res.Body).Decode(&e)
		return res.StatusCode, e.Message
	}
	create := func(body map[string]any) string {
		t.Helper()
		body["templateID"] = "box"
		req, _ := json.Marshal(body)
		hreq, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/sandboxes", bytes.NewReader(req))
		hreq.Header.Set("X-API-Key", e2btest.APIKey)
		res, err := c.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var sb struct {
			SandboxID string `json:"sandboxID"`
		}
		if err := json.NewDecoder(res.Body).Decode(&sb); err != nil || res.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d, %v", res.StatusCode, err)
		}
		return sb.SandboxID // killed with the emulator
	}
	open := create(map[string]any{"timeout": 300})
	confined := create(map[string]any{"timeout": 300, "network": map[string]any{"denyOut": []string{"0.0.0.0/0"}}})
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		msg                string
	}{
		{"create: a domain in denyOut", http.MethodPost, "/sandboxes", map[string]any{"templateID": "box",
			"network": map[string]any{"denyOut": []string{"example.com"}}}, 400, "domains are not supported"},
		{"create: a port in allowOut", http.MethodPost, "/sandboxes", map[string]any{"templateID": "box",
			"network": map[string]any{"allowOut": []string{"10.1.2.3:443"}, "denyOut": []string{"0.0.0.0/0"}}}, 400, "without a port"},
		{"create: deny some, allow the rest", http.MethodPost, "/sandboxes", map[string]any{"templateID": "box",
			"network": map[string]any{"denyOut": []string{"10.0.0.0/8"}}}, 501, "not emulated"},
		{"update: unknown sandbox", http.MethodPut, "/sandboxes/nosuchbox/network", map[string]any{"denyOut": []string{"0.0.0.0/0"}}, 404, ""},
		{"update: a sandbox created open", http.MethodPut, "/sandboxes/" + open + "/network", map[string]any{"denyOut": []string{"0.0.0.0/0"}}, 409, "created with open egress"},
		{"update: opening a confined sandbox", http.MethodPut, "/sandboxes/" + confined + "/network", map[string]any{}, 409, "stays confined"},
		{"update: a bad entry", http.MethodPut, "/sandboxes/" + confined + "/network", map[string]any{"allowOut": []string{"not a host"}, "denyOut": []string{"0.0.0.0/0"}}, 400, "allowOut"},
		{"update: holds", http.MethodPut, "/sandboxes/" + confined + "/network", map[string]any{"allowOut": []string{r.allowedName}, "denyOut": []string{"0.0.0.0/0"}}, 204, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := do(tc.method, tc.path, tc.body)
			if status != tc.status || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s %s = %d %q, want %d with %q", tc.method, tc.path, status, msg, tc.status, tc.msg)
			}
		})
	}
}
