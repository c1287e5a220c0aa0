package e2bemu_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// start runs an emulator with the box image as template "box".
func start(t *testing.T, edit func(*e2bemu.Options)) *e2btest.Env {
	t.Helper()
	img := boxtest.Pushed(t, boxtest.Options{})
	return e2btest.Start(t, func(o *e2bemu.Options) {
		o.Templates = map[string]string{"box": img}
		if edit != nil {
			edit(o)
		}
	})
}

func create(t *testing.T, v *e2b.Vendor, spec vendors.CreateSpec) vendors.Box {
	t.Helper()
	spec.Image, spec.RunTag = "box", vendortest.RunTag(t)
	if spec.Lifetime == 0 {
		spec.Lifetime = 5 * time.Minute
	}
	b, err := v.Create(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Destroy(t.Context()) })
	return b
}

// rawClient sends requests for hosts under the emulator's domain to it.
func rawClient(env *e2btest.Env) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	vendorhttp.Resolve(tr, env.Server.Domain(), env.Addr)
	return &http.Client{Transport: tr}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, url string, header map[string]string, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// TestServer_Routes checks answers the client never provokes in the
// suite: authentication, paging, routing by header, the proxy's own
// errors and Connect's content types.
func TestServer_Routes(t *testing.T) {
	env := start(t, nil)
	v := env.Client(t)
	box := create(t, v, vendors.CreateSpec{Ports: []int{8080}})
	create(t, v, vendors.CreateSpec{})
	c := rawClient(env)
	api := "http://api." + env.Server.Domain()
	key := map[string]string{"X-API-Key": e2btest.APIKey}
	envd := "http://49983-" + box.ID() + "." + env.Server.Domain()

	cases := []struct {
		name       string
		method     string
		url        string
		header     map[string]string
		body       string
		wantStatus int
		wantBody   string
	}{
		{"no API key", "GET", api + "/v2/sandboxes", nil, "", 401, `"code":401`},
		{"unknown sandbox", "GET", api + "/sandboxes/nope", key, "", 404, `"code":404`},
		{"timeout over the plan", "POST", api + "/sandboxes/" + box.ID() + "/timeout", key, `{"timeout":86400}`, 400, "cannot be greater"},
		{"unknown template", "POST", api + "/v2/sandboxes", key, `{"templateID":"nope"}`, 404, "template 'nope' not found"},
		{"connect without a body", "POST", api + "/v2/sandboxes/" + box.ID() + "/connect", key, "", 200, `"sandboxID":"` + box.ID() + `"`},
		{"connect an unknown sandbox", "POST", api + "/v2/sandboxes/nope/connect", key, `{"timeout":10}`, 404, `"code":404`},
		{"not emulated", "GET", api + "/volumes", key, "", 501, `{"code":501,"error_code":"not_emulated","message":"volumes (GET /volumes) are not emulated"}`},
		{"metrics", "GET", api + "/sandboxes/" + box.ID() + "/metrics", key, "", 200, `"memTotal":`},
		{"envd health needs no token", "GET", envd + "/health", nil, "", 204, ""},
		{"envd files need the token", "GET", envd + "/files?path=/etc/hostname", nil, "", 401, "unauthorized access"},
		{"routing by header", "GET", "http://" + env.Addr + "/health",
			map[string]string{"E2b-Sandbox-Id": box.ID(), "E2b-Sandbox-Port": "49983"}, "", 204, ""},
		{"exposed port wants the traffic token", "GET", "http://8080-" + box.ID() + "." + env.Server.Domain() + "/", nil, "", 403,
			"Token header 'e2b-traffic-access-token' is missing"},
		{"wrong traffic token", "GET", "http://8080-" + box.ID() + "." + env.Server.Domain() + "/",
			map[string]string{"e2b-traffic-access-token": "wrong"}, "", 403, "is invalid"},
		{"unknown sandbox host", "GET", "http://49983-nope." + env.Server.Domain() + "/health", nil, "", 502,
			`{"sandboxId":"nope","message":"The sandbox was not found","code":502}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, c, tc.method, tc.url, tc.header, tc.body)
			if a.status != tc.wantStatus || !strings.Contains(a.body, tc.wantBody) {
				t.Errorf("%s %s = %d %q, want %d with %q", tc.method, tc.url, a.status, a.body, tc.wantStatus, tc.wantBody)
			}
		})
	}

	t.Run("paging", func(t *testing.T) {
		a := do(t, c, "GET", api+"/v2/sandboxes?limit=1", key, "")
		var page []map[string]any
		if err := json.Unmarshal([]byte(a.body), &page); a.status != 200 || err != nil || len(page) != 1 || a.header.Get("X-Next-Token") == "" {
			t.Fatalf("first page = %d %q (next %q), want one sandbox and a next token", a.status, a.body, a.header.Get("X-Next-Token"))
		}
		a = do(t, c, "GET", api+"/v2/sandboxes?limit=1&nextToken="+a.header.Get("X-Next-Token"), key, "")
		if err := json.Unmarshal([]byte(a.body), &page); err != nil || len(page) != 1 || a.header.Get("X-Next-Token") != "" {
			t.Errorf("second page = %q (next %q), want the other sandbox and no next token", a.body, a.header.Get("X-Next-Token"))
		}
	})

	t.Run("closed port", func(t *testing.T) {
		ep, err := box.Endpoint(t.Context(), 8080)
		if err != nil {
			t.Fatal(err)
		}
		a := do(t, rawClient(env), "GET", ep.URL+"/", map[string]string{"e2b-traffic-access-token": ep.Header.Get("e2b-traffic-access-token")}, "")
		if a.status != 502 || !strings.Contains(a.body, "port is not open") {
			t.Errorf("GET a closed port = %d %q, want 502 port is not open", a.status, a.body)
		}
	})

	t.Run("connect content types", func(t *testing.T) {
		info := do(t, c, "GET", api+"/sandboxes/"+box.ID(), key, "")
		var d struct{ EnvdAccessToken string }
		_ = json.Unmarshal([]byte(info.body), &d)
		tok := map[string]string{"X-Access-Token": d.EnvdAccessToken, "Content-Type": "application/json"}
		if a := do(t, c, "POST", envd+"/process.Process/Start", tok, `{}`); a.status != 415 {
			t.Errorf("Start as a unary call = %d, want 415", a.status)
		}
		tok["Content-Type"] = "application/connect+json"
		msg := []byte(`{"process":{"tag":"nope"}}`)
		frame := append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)
		a := do(t, c, "POST", envd+"/process.Process/Connect", tok, string(frame))
		if a.status != 200 || len(a.body) < 5 || a.body[0] != 2 || !strings.Contains(a.body, `"code":"not_found"`) {
			t.Errorf("Connect(unknown tag) = %d %q, want the end-of-stream frame with not_found", a.status, a.body)
		}
		tok["Content-Type"] = "application/json"
		a = do(t, c, "POST", envd+"/process.Process/SendSignal", tok, `{"process":{"pid":1},"signal":"SIGNAL_SIGTERM"}`)
		if a.status != 404 || !bytes.Contains([]byte(a.body), []byte(`"code":"not_found"`)) {
			t.Errorf("SendSignal(unknown pid) = %d %q, want 404 not_found", a.status, a.body)
		}
	})
}

// TestServer_Faults checks each fault switch.
func TestServer_Faults(t *testing.T) {
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		env := start(t, func(o *e2bemu.Options) { o.Faults.ErrorRate = 1 })
		v := env.Client(t, e2b.WithRetry(0, time.Millisecond, time.Millisecond))
		_, err := v.List(t.Context(), nil)
		var ae *e2b.APIError
		var rl *vendors.RateLimitError
		if !errors.As(err, &rl) && !(errors.As(err, &ae) && ae.Status == 503) {
			t.Errorf("List with every call failing = %v, want a 429 or a 503", err)
		}
	})
	t.Run("slow create", func(t *testing.T) {
		t.Parallel()
		env := start(t, func(o *e2bemu.Options) { o.Faults.CreateDelay = 2 * time.Second })
		begin := time.Now()
		create(t, env.Client(t), vendors.CreateSpec{})
		if d := time.Since(begin); d < 2*time.Second {
			t.Errorf("Create took %v, want at least the 2s delay", d)
		}
	})
	t.Run("vanish", func(t *testing.T) {
		t.Parallel()
		env := start(t, func(o *e2bemu.Options) { o.Faults.VanishAfter = 2 * time.Second })
		v := env.Client(t)
		b := create(t, v, vendors.CreateSpec{})
		polltest.Until(t, 20*time.Second, "the sandbox to vanish", func() bool {
			_, err := v.Connect(t.Context(), b.ID())
			return errors.Is(err, vendors.ErrNotFound)
		})
		_, err := b.Exec(t.Context(), vendors.ExecSpec{Command: []string{"true"}})
		if !errors.Is(err, vendors.ErrGone) {
			t.Errorf("Exec in a vanished sandbox = %v, want ErrGone", err)
		}
	})
	t.Run("plan limit", func(t *testing.T) {
		t.Parallel()
		env := start(t, func(o *e2bemu.Options) { o.MaxSandboxes = 1 })
		v := env.Client(t, e2b.WithRetry(1, time.Millisecond, time.Millisecond))
		create(t, v, vendors.CreateSpec{})
		_, err := v.Create(t.Context(), vendors.CreateSpec{Image: "box", RunTag: vendortest.RunTag(t), Lifetime: time.Minute})
		var rl *vendors.RateLimitError
		if !errors.As(err, &rl) || !rl.Quota {
			t.Errorf("Create over the plan's sandboxes = %v, want a quota *vendors.RateLimitError", err)
		}
	})
}
