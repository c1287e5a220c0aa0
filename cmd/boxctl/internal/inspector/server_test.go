package inspector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/goldentest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// listVendor is a vendor whose List answers infos (or err) and that has no
// box to connect to.
type listVendor struct {
	infos []vendors.Info
	err   error
}

func (v listVendor) Name() string             { return "docker" }
func (v listVendor) Supports() vendors.Fields { return vendors.Fields{} }
func (v listVendor) Create(context.Context, vendors.CreateSpec) (vendors.Box, error) {
	return nil, errors.New("listVendor creates nothing")
}
func (v listVendor) Connect(context.Context, string) (vendors.Box, error) {
	return nil, vendors.ErrNotFound
}
func (v listVendor) List(context.Context, map[string]string) ([]vendors.Info, error) {
	return v.infos, v.err
}

var (
	created  = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	deadline = created.Add(time.Hour)
)

// fixture is a server over a state of two docker boxes (one of them gone
// from the vendor) and one e2b box whose vendor cannot be opened.
type fixture struct {
	srv   *Server
	store *boxstate.Store
	ts    *httptest.Server
}

func newFixture(t *testing.T, opts ...func(*Options)) *fixture {
	t.Helper()
	store, err := boxstate.Open(boxstate.Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(id, target, tag string) boxstate.Record {
		return boxstate.Record{ID: id, Target: target, Image: "img", RunTag: tag, Created: created, Deadline: deadline,
			Reference: &sandbox.Reference{Vendor: target, BoxID: id, Bearer: "bearer-secret-" + id, Harness: "claude-code", EnvironmentKey: "key-" + id, RunTag: tag}}
	}
	if err := store.Update(t.Context(), func(st *boxstate.State) error {
		st.Boxes = append(st.Boxes, rec("box-live-0001", "docker", "run-a"), rec("box-gone-0002", "docker", "run-b"),
			rec("box-e2b-0003", "e2b", "run-c"), rec("box-asleep-0004", "docker", "run-d"))
		// A suspended box's record keeps no bearer.
		st.Boxes[3].Reference.Bearer, st.Boxes[3].Created = "", created.Add(-time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v := listVendor{infos: []vendors.Info{
		{ID: "box-live-0001", Vendor: "docker", State: vendors.StateRunning, Image: "img", Created: created, Deadline: deadline,
			Labels: map[string]string{boxmeta.LabelRunTag: "run-a", boxmeta.LabelOwner: store.Owner(), boxmeta.LabelPool: "docker-claude-code-0a1b2c3d"}},
		{ID: "box-asleep-0004", Vendor: "docker", State: vendors.StateSuspended, Image: "img", Created: created.Add(-time.Minute), Deadline: deadline,
			Labels: map[string]string{boxmeta.LabelRunTag: "run-d", boxmeta.LabelOwner: store.Owner()}},
		{ID: "someone-else", Vendor: "docker", State: vendors.StateRunning, Created: created,
			Labels: map[string]string{boxmeta.LabelRunTag: "run-x", boxmeta.LabelOwner: "other"}},
	}}
	o := Options{Store: store, PoolDir: t.TempDir(), Getenv: func(string) string { return "" },
		Vendor: func(target string) (vendors.Vendor, error) {
			if target == "e2b" {
				return nil, errors.New("--target e2b needs E2B_API_KEY")
			}
			return v, nil
		}}
	for _, opt := range opts {
		opt(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		_ = srv.Close(context.Background())
	})
	return &fixture{srv: srv, store: store, ts: ts}
}

// login exchanges the server's token for its cookie and returns a client
// that carries it, and the session's CSRF token.
func (f *fixture) login(t *testing.T) (*http.Client, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	u, _ := url.Parse(f.ts.URL)
	resp, err := c.Get(f.srv.URL(addr(u.Host)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("boxctl inspector")) {
		t.Fatalf("GET the token URL = %s %q, want the page", resp.Status, body)
	}
	if resp.Request.URL.RawQuery != "" {
		t.Errorf("after the exchange the page is at %s, want no token in its URL", resp.Request.URL)
	}
	var s struct{ CSRF string }
	f.getJSON(t, c, "/api/session", http.StatusOK, &s)
	if s.CSRF == "" {
		t.Fatal("GET /api/session: no csrf")
	}
	return c, s.CSRF
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }

func (f *fixture) getJSON(t *testing.T, c *http.Client, path string, status int, v any) {
	t.Helper()
	resp, err := c.Get(f.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decodeAs(t, "GET "+path, resp, status, v)
}

func decodeAs(t *testing.T, what string, resp *http.Response, status int, v any) {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s = %d %s, want %d", what, resp.StatusCode, b, status)
	}
	if ct := resp.Header.Get("Content-Type"); v != nil && ct != "application/json" {
		t.Fatalf("%s: Content-Type %q, want application/json", what, ct)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v in %s", what, err, b)
		}
	}
}

// errType reads an error answer's type.
func errType(t *testing.T, what string, resp *http.Response, status int) string {
	t.Helper()
	var e ErrorResponse
	decodeAs(t, what, resp, status, &e)
	if e.Error == nil || e.Error.Status != status || e.Error.Message == "" {
		t.Fatalf("%s: error body %+v, want status %d and a message", what, e.Error, status)
	}
	return e.Error.Type
}

func TestServer_RefusesWithoutSession(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/", "/assets/app.js", "/api/session", "/api/boxes", "/api/boxes/box-live-0001/logs", "/nowhere"} {
		resp, err := http.Get(f.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if got := errType(t, "GET "+path, resp, http.StatusUnauthorized); got != TypeUnauthenticated {
			t.Errorf("GET %s without a cookie: type %q, want %q", path, got, TypeUnauthenticated)
		}
		resp.Body.Close()
	}
	// A wrong cookie is no session either.
	req, _ := http.NewRequest(http.MethodGet, f.ts.URL+"/api/boxes", nil)
	req.AddCookie(&http.Cookie{Name: f.srv.auth.cookie, Value: "guess"})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := errType(t, "GET with a wrong cookie", resp, http.StatusUnauthorized); got != TypeUnauthenticated {
		t.Errorf("wrong cookie: type %q, want %q", got, TypeUnauthenticated)
	}
}

func TestServer_TokenWorksOnce(t *testing.T) {
	f := newFixture(t)
	u, _ := url.Parse(f.ts.URL)
	link := f.srv.URL(addr(u.Host))
	if !strings.HasPrefix(link, "http://"+u.Host+"/?token=") {
		t.Fatalf("URL = %q, want http://%s/?token=...", link, u.Host)
	}
	f.login(t)
	for _, target := range []string{link, f.ts.URL + "/?token=wrong"} {
		resp, err := http.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		if got := errType(t, "GET a spent or wrong token", resp, http.StatusUnauthorized); got != TypeInvalidToken {
			t.Errorf("GET %s: type %q, want %q", target, got, TypeInvalidToken)
		}
		resp.Body.Close()
	}
}

func TestServer_StateChangingChecks(t *testing.T) {
	f := newFixture(t)
	c, csrf := f.login(t)
	origin := f.ts.URL
	tests := []struct {
		name          string
		origin, token string
		host          string
		status        int
		typ           string
	}{
		{name: "no origin", token: csrf, status: http.StatusForbidden, typ: TypeBadOrigin},
		{name: "another origin", origin: "http://evil.example", token: csrf, status: http.StatusForbidden, typ: TypeBadOrigin},
		{name: "no csrf token", origin: origin, status: http.StatusForbidden, typ: TypeBadCSRF},
		{name: "wrong csrf token", origin: origin, token: "x" + csrf[1:], status: http.StatusForbidden, typ: TypeBadCSRF},
		{name: "rebound host", origin: "http://evil.example", token: csrf, host: "evil.example", status: http.StatusForbidden, typ: TypeBadHost},
		// Past the guard: the body is checked next.
		{name: "both right", origin: origin, token: csrf, status: http.StatusBadRequest, typ: TypeInvalidRequest},
	}
	for _, tt := range tests {
		for _, route := range []string{"turns", "suspend", "resume", "replace"} {
			t.Run(tt.name+"/"+route, func(t *testing.T) {
				f.checkGuard(t, c, route, tt.origin, tt.token, tt.host, tt.status, tt.typ)
			})
		}
	}
}

// checkGuard POSTs to route of the listed box with origin, CSRF token
// and host, and wants the answer status and error type; past the guard,
// the turn's empty prompt is refused and the listing vendor's box cannot
// be connected for a suspend (410), nor resumed without a Router (503).
func (f *fixture) checkGuard(t *testing.T, c *http.Client, route, origin, token, host string, status int, typ string) {
	t.Helper()
	if status == http.StatusBadRequest && route != "turns" {
		status, typ = http.StatusGone, TypeBoxGone
		if route == "resume" || route == "replace" {
			status, typ = http.StatusServiceUnavailable, TypeNoRouter
		}
	}
	req, _ := http.NewRequest(http.MethodPost, f.ts.URL+"/api/boxes/box-live-0001/"+route, strings.NewReader(`{"prompt":""}`))
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if token != "" {
		req.Header.Set(CSRFHeader, token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := errType(t, "POST "+route, resp, status); got != typ {
		t.Errorf("POST %s: type %q, want %q", route, got, typ)
	}
}

func TestServer_Validation(t *testing.T) {
	f := newFixture(t)
	c, csrf := f.login(t)
	post := func(path, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, f.ts.URL+path, strings.NewReader(body))
		req.Header.Set("Origin", f.ts.URL)
		req.Header.Set(CSRFHeader, csrf)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	get := func(path string) *http.Response {
		resp, err := c.Get(f.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	const box = "/api/boxes/box-live-0001"
	tests := []struct {
		name   string
		do     func() *http.Response
		status int
		typ    string
	}{
		{"empty prompt", func() *http.Response { return post(box+"/turns", `{"prompt":"  "}`) }, 400, TypeInvalidRequest},
		{"unknown field", func() *http.Response { return post(box+"/turns", `{"prompt":"hi","bearer":"x"}`) }, 400, TypeInvalidRequest},
		{"trailing data", func() *http.Response { return post(box+"/turns", `{"prompt":"hi"}{}`) }, 400, TypeInvalidRequest},
		{"not JSON", func() *http.Response { return post(box+"/turns", `prompt=hi`) }, 400, TypeInvalidRequest},
		{"prompt too long", func() *http.Response {
			b, _ := json.Marshal(TurnRequest{Prompt: strings.Repeat("x", MaxPrompt+1)})
			return post(box+"/turns", string(b))
		}, 400, TypeInvalidRequest},
		{"model with spaces", func() *http.Response { return post(box+"/turns", `{"prompt":"hi","model":"a b"}`) }, 400, TypeInvalidRequest},
		{"bad decision", func() *http.Response { return post(box+"/runs/run-1/interactions/ask-1", `{"decision":"maybe"}`) }, 400, TypeInvalidRequest},
		{"unseen interaction", func() *http.Response { return post(box+"/runs/run-1/interactions/ask-1", `{"decision":"allow"}`) }, 404, TypeNotFound},
		{"bad run id", func() *http.Response { return get(box + "/runs/-bad/events") }, 400, TypeInvalidRequest},
		{"bad cursor", func() *http.Response { return get(box + "/runs/run-1/events?since=x") }, 400, TypeInvalidRequest},
		{"bad trace run id", func() *http.Response { return get(box + "/runs/-bad/trace") }, 400, TypeInvalidRequest},
		{"box not in the state", func() *http.Response { return get("/api/boxes/nobox/logs") }, 404, TypeNotFound},
		{"destroy a box not in the state", func() *http.Response { return post("/api/boxes/nobox/destroy", `{}`) }, 404, TypeNotFound},
		{"suspend a box not in the state", func() *http.Response { return post("/api/boxes/nobox/suspend", `{}`) }, 404, TypeNotFound},
		{"resume a box not in the state", func() *http.Response { return post("/api/boxes/nobox/resume", `{}`) }, 404, TypeNotFound},
		{"suspend a box gone from its vendor", func() *http.Response { return post("/api/boxes/box-gone-0002/suspend", `{}`) }, 410, TypeBoxGone},
		{"suspend on a vendor that cannot open", func() *http.Response { return post("/api/boxes/box-e2b-0003/suspend", `{}`) }, 502, TypeUpstream},
		{"resume without a Router", func() *http.Response { return post("/api/boxes/box-live-0001/resume", `{}`) }, 503, TypeNoRouter},
		{"suspend by GET", func() *http.Response { return get("/api/boxes/box-live-0001/suspend") }, 405, TypeMethodNotAllowed},
		{"replace a box not in the state", func() *http.Response { return post("/api/boxes/nobox/replace", `{}`) }, 404, TypeNotFound},
		{"replace without model access", func() *http.Response { return post("/api/boxes/box-gone-0002/replace", `{}`) }, 503, TypeNoRouter},
		{"replace by GET", func() *http.Response { return get("/api/boxes/box-gone-0002/replace") }, 405, TypeMethodNotAllowed},
		{"pools by POST", func() *http.Response { return post("/api/pools", `{}`) }, 405, TypeMethodNotAllowed},
		{"box gone from its vendor", func() *http.Response { return get("/api/boxes/box-gone-0002/logs") }, 410, TypeBoxGone},
		{"vendor that cannot open", func() *http.Response { return get("/api/boxes/box-e2b-0003/logs") }, 502, TypeUpstream},
		{"no route", func() *http.Response { return get("/api/nothing") }, 404, TypeNotFound},
		{"wrong method", func() *http.Response { return post("/api/boxes", `{}`) }, 405, TypeMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.do()
			defer resp.Body.Close()
			if got := errType(t, tt.name, resp, tt.status); got != tt.typ {
				t.Errorf("%s: type %q, want %q", tt.name, got, tt.typ)
			}
		})
	}
}

func TestServer_Boxes(t *testing.T) {
	f := newFixture(t)
	c, _ := f.login(t)
	resp, err := c.Get(f.ts.URL + "/api/boxes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/boxes = %d %s", resp.StatusCode, got)
	}
	// The owner label depends on the user running the test.
	got = bytes.ReplaceAll(got, []byte(f.store.Owner()), []byte("OWNER"))
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	goldentest.Check(t, filepath.Join("testdata", "boxes.golden.json"), pretty.Bytes())
	if bytes.Contains(got, []byte("bearer-secret")) {
		t.Error("the box listing carries a bearer")
	}

	var box Box
	f.getJSON(t, c, "/api/boxes/box-live-0001", http.StatusOK, &box)
	if box.ID != "box-live-0001" || box.State != "running" || box.Harness != "claude-code" || box.RunTag != "run-a" ||
		box.Pool != "docker-claude-code-0a1b2c3d" || box.Suspended {
		t.Errorf("GET /api/boxes/box-live-0001 = %+v", box)
	}
}

// warmVendor is a vendor that keeps warm pools of its own.
type warmVendor struct {
	vendors.Vendor
	pools []vendors.PoolSummary
}

func (w warmVendor) Pools(context.Context) ([]vendors.PoolSummary, error) { return w.pools, nil }
func (warmVendor) EnsurePool(context.Context, vendors.PoolSpec) error     { return nil }
func (warmVendor) WaitPool(context.Context, string) error                 { return nil }
func (warmVendor) DeletePool(context.Context, string) error               { return nil }
func (warmVendor) PoolState(context.Context, string) (vendors.PoolStatus, error) {
	return vendors.PoolStatus{}, vendors.ErrNotFound
}
func (warmVendor) RecyclePool(context.Context, string, time.Duration) (int, error) { return 0, nil }

// TestServer_Pools lists a pool's file (one box of a running keeper, one
// of a keeper that is gone) with the figures of its keeper's /metrics, a
// keeper's pool without a file, a pool its vendor keeps (Kubernetes), and
// a keeper that cannot be read.
func TestServer_Pools(t *testing.T) {
	dir := t.TempDir()
	self := reaper.ProcessOwner()
	parts := strings.Split(self, ":")
	parts[2] = "999999999" // no such process: its keeper is gone
	gone := strings.Join(parts, ":")
	file := fmt.Sprintf(`{"version":1,"boxes":[
	 {"vendor":"docker","boxId":"b1","harness":"claude-code","runTag":"r1","token":"pool-secret-1","keeper":%q},
	 {"vendor":"docker","boxId":"b2","harness":"claude-code","runTag":"r2","token":"pool-secret-2","keeper":%q}]}`, self, gone)
	if err := os.WriteFile(filepath.Join(dir, "docker-claude-code-0a1b2c3d.json"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	keeper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `# TYPE boxctl_pool_claims_total counter
boxctl_pool_claims_total{pool="docker-claude-code-0a1b2c3d"} 7
# TYPE boxctl_pool_hits_total counter
boxctl_pool_hits_total{pool="docker-claude-code-0a1b2c3d"} 5
# TYPE boxctl_pool_misses_total counter
boxctl_pool_misses_total{pool="docker-claude-code-0a1b2c3d"} 2
# TYPE boxctl_pool_size gauge
boxctl_pool_size{pool="docker-claude-code-0a1b2c3d"} 3
boxctl_pool_size{pool="e2b-codex-00000000"} 1
# TYPE boxctl_pool_breaker_open gauge
boxctl_pool_breaker_open{pool="e2b-codex-00000000"} 1
`)
	}))
	t.Cleanup(keeper.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	oldest := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	kube := warmVendor{pools: []vendors.PoolSummary{{Name: "kubernetes-pi-00000000", PoolStatus: vendors.PoolStatus{Want: 2, Idle: 2, Ready: 1, Oldest: oldest}}}}
	f := newFixture(t, func(o *Options) {
		o.PoolDir = dir
		o.KeeperMetrics = []string{strings.TrimPrefix(keeper.URL, "http://"), down.URL}
		o.PoolTargets = []string{"kubernetes"}
		docker := o.Vendor
		o.Vendor = func(target string) (vendors.Vendor, error) {
			if target == "kubernetes" {
				return kube, nil
			}
			return docker(target)
		}
	})
	c, _ := f.login(t)
	var got Pools
	f.getJSON(t, c, "/api/pools", http.StatusOK, &got)
	src := keeper.URL + "/metrics"
	want := []Pool{
		{Summary: pool.Summary{Name: "docker-claude-code-0a1b2c3d", Ready: 1, Orphaned: 1, Keepers: []string{self}},
			Keeper: &KeeperStats{Source: src, Size: 3, Claims: 7, Hits: 5, Misses: 2}},
		{Summary: pool.Summary{Name: "kubernetes-pi-00000000", VendorKept: true, Ready: 1, Want: 2, Idle: 2, Oldest: oldest, Keepers: []string{}},
			Target: "kubernetes"},
		{Summary: pool.Summary{Name: "e2b-codex-00000000", Keepers: []string{}},
			Keeper: &KeeperStats{Source: src, Size: 1, BreakerOpen: true}},
	}
	if diff := cmp.Diff(want, got.Pools); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if len(got.Errors) != 1 || got.Errors[0].Source != down.URL+"/metrics" || got.Shown != PoolsShown {
		t.Errorf("errors %+v, shown %q: want the closed keeper's error and PoolsShown", got.Errors, got.Shown)
	}
	raw, err := c.Get(f.ts.URL + "/api/pools")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Body.Close()
	if b, _ := io.ReadAll(raw.Body); bytes.Contains(b, []byte("pool-secret")) {
		t.Error("the pool listing carries a pool token")
	}

	if _, err := New(Options{Store: f.store, Vendor: f.srv.o.Vendor, KeeperMetrics: []string{"ftp://x"}}); err == nil {
		t.Error("New with an ftp:// keeper metrics URL: no error")
	}
}

func TestServer_Events(t *testing.T) {
	f := newFixture(t)
	c, _ := f.login(t)
	at := created.Add(time.Minute)
	for _, ev := range []sandbox.Event{
		{Time: at, Type: sandbox.EventCreated, Vendor: "docker", BoxID: "box-live-0001", RunTag: "run-a"},
		{Time: at, Type: sandbox.EventCreated, Vendor: "docker", BoxID: "box-gone-0002", RunTag: "run-b"},
		{Time: at.Add(time.Second), Type: sandbox.EventTurnStarted, Vendor: "docker", BoxID: "box-live-0001", RunTag: "run-a"},
		{Time: at.Add(3 * time.Second), Type: sandbox.EventTurnEnded, Vendor: "docker", BoxID: "box-live-0001", RunTag: "run-a",
			RunID: "run-1", Reason: provider.StatusCompleted},
	} {
		if err := f.store.Events().Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	var evs []sandbox.Event
	f.getJSON(t, c, "/api/boxes/box-live-0001/events", http.StatusOK, &evs)
	if len(evs) != 3 || evs[0].Type != sandbox.EventCreated || evs[2].RunID != "run-1" {
		t.Errorf("events = %+v, want the box's three", evs)
	}
	var runs []Run
	f.getJSON(t, c, "/api/boxes/box-live-0001/runs", http.StatusOK, &runs)
	want := []Run{{RunID: "run-1", Started: stamp(at.Add(time.Second)), Ended: stamp(at.Add(3 * time.Second)), Outcome: "completed"}}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}

func TestServer_TraceOff(t *testing.T) {
	f := newFixture(t)
	c, _ := f.login(t)
	var tr Trace
	f.getJSON(t, c, "/api/boxes/box-live-0001/runs/run-1/trace", http.StatusOK, &tr)
	if tr.Tracing || len(tr.Spans) != 0 {
		t.Errorf("trace without Jaeger = %+v, want tracing off and no spans", tr)
	}
}

func TestSpansOf(t *testing.T) {
	var jt jaegerTraces
	raw := `{"data":[{"traceID":"t1","processes":{"p1":{"serviceName":"boxctl"},"p2":{"serviceName":"box-bridge"}},"spans":[
	 {"spanID":"b","operationName":"turn","references":[{"refType":"CHILD_OF","spanID":"a"}],"startTime":1000500,"duration":2000,"processID":"p1"},
	 {"spanID":"a","operationName":"inspector.turn","startTime":1000000,"duration":4000,"processID":"p1"},
	 {"spanID":"c","operationName":"bridge.admit","references":[{"refType":"CHILD_OF","spanID":"b"}],"startTime":1001000,"duration":500,"processID":"p2",
	  "tags":[{"key":"error","value":true}]}]}]}`
	if err := json.Unmarshal([]byte(raw), &jt); err != nil {
		t.Fatal(err)
	}
	want := []Span{
		{Name: "inspector.turn", Service: "boxctl", StartMS: 0, DurationMS: 4, Depth: 0},
		{Name: "turn", Service: "boxctl", StartMS: 0.5, DurationMS: 2, Depth: 1},
		{Name: "bridge.admit", Service: "box-bridge", StartMS: 1, DurationMS: 0.5, Depth: 2, Error: true},
	}
	if diff := cmp.Diff(want, spansOf(jt)); diff != "" {
		t.Errorf("spansOf (-want +got):\n%s", diff)
	}
}

func TestAPIError(t *testing.T) {
	tests := []struct {
		err    error
		status int
		typ    string
	}{
		{errorf(http.StatusTeapot, "x", "m"), http.StatusTeapot, "x"},
		{fmt.Errorf("wrapped: %w", &boxstate.NoBoxError{Arg: "b"}), 404, TypeNotFound},
		{fmt.Errorf("connect: %w", vendors.ErrNotFound), 410, TypeBoxGone},
		{&provider.ConflictError{Op: "environment.Stream", Type: "session_busy", Message: "busy"}, 409, TypeBusy},
		{fmt.Errorf("suspend: %w", &provider.ConflictError{Op: "environment.Suspend", Type: "session_busy", Message: "1 live run"}), 409, TypeBusy},
		{&provider.ConflictError{Op: "environment.Run", Type: "other", Message: "m"}, 409, TypeConflict},
		{fmt.Errorf("suspend: %w", &vendors.NotSuspendableError{Vendor: "docker", ID: "b", Reason: "no retention"}), 409, TypeNotSuspendable},
		{fmt.Errorf("resume: %w", &sandbox.MissingRouterEnvError{Vars: []string{sandbox.RouterURLEnv}}), 503, TypeNoRouter},
		{&provider.IdentityMismatchError{Op: "environment.Run", Reason: "r"}, 409, TypeConflict},
		{&provider.NotFoundError{Op: "session.Status"}, 404, TypeNotFound},
		{&provider.ExpiredCursorError{Op: "session.Events"}, 410, TypeExpired},
		{fmt.Errorf("replace: %w", sandbox.ErrNotLost), 409, TypeNotLost},
		{fmt.Errorf("replace: %w", broker.ErrNoReplica), 409, TypeNoReplica},
		{fmt.Errorf("replace: the replica's turns of box b: %w", &broker.APIError{Status: 404, Type: "not_found"}), 409, TypeNoReplica},
		{errClosed, 503, TypeUnavailable},
		{errors.New("dial tcp: refused"), 502, TypeUpstream},
	}
	for _, tt := range tests {
		got := apiError(tt.err)
		if got.Status != tt.status || got.Type != tt.typ || got.Message == "" {
			t.Errorf("apiError(%v) = %+v, want %d %s", tt.err, got, tt.status, tt.typ)
		}
	}
}

func TestNew_Options(t *testing.T) {
	store, _ := boxstate.Open(boxstate.Options{Path: filepath.Join(t.TempDir(), "b.json")})
	open := func(string) (vendors.Vendor, error) { return listVendor{}, nil }
	for _, o := range []Options{{Vendor: open}, {Store: store}, {Store: store, Vendor: open, JaegerURL: "ftp://x"}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) = nil error, want one", o)
		}
	}
}
