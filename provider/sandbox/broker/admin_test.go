package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// TestAdmin: a client in another process drives a broker through its
// admin API on a unix socket: upstreams, listeners, grants, bindings,
// usage and revocation; bad input is a typed 4xx.
func TestAdmin(t *testing.T) {
	r := newRig(t)
	sock := filepath.Join(t.TempDir(), "broker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	srv := &http.Server{Handler: r.b.Admin(func(_ context.Context, host string) (string, error) {
		hosts = append(hosts, host)
		return "http://" + host + ":1234", nil
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := broker.Dial(sock)
	ctx := t.Context()
	if err := c.SetUpstream(ctx, broker.Upstream{Name: "local-1", URL: "http://127.0.0.1:9", Key: "k-local", Auth: broker.AuthBearer}); err != nil {
		t.Fatal(err)
	}
	if u, err := c.Listen(ctx, "172.18.0.1"); err != nil || u != "http://172.18.0.1:1234" || len(hosts) != 1 {
		t.Errorf("Listen = %q, %v (hosts %v)", u, err, hosts)
	}
	tok, err := c.Grant(ctx, broker.Grant{Box: "b1", Until: time.Now().Add(time.Hour)})
	if err != nil || !strings.HasPrefix(tok, "bxt_") {
		t.Fatalf("Grant = %q, %v", tok, err)
	}
	if err := c.Bind(ctx, "b1", netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	resp := r.do(t, calls[0], tok)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request with the admin's token: %d", resp.StatusCode)
	}
	if u, err := c.Usage(ctx, "b1"); err != nil || u.Requests != 1 {
		t.Errorf("Usage = %+v, %v", u, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Boxes != 1 || len(st.Upstreams) != 2 || st.Upstreams[1] != "local-1" {
		t.Errorf("Status = %+v, %v", st, err)
	}
	if err := c.Revoke(ctx, "b1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Usage(ctx, "nobody"); !errors.Is(err, broker.ErrUnknownBox) {
		t.Errorf("Usage(unknown) = %v, want ErrUnknownBox", err)
	}
	var api *broker.APIError
	for name, err := range map[string]error{
		"grant without a box":    func() error { _, err := c.Grant(ctx, broker.Grant{}); return err }(),
		"unknown upstream":       func() error { _, err := c.Grant(ctx, broker.Grant{Box: "x", Upstream: "nope"}); return err }(),
		"upstream without key":   c.SetUpstream(ctx, broker.Upstream{Name: "x", URL: "http://h", Auth: broker.AuthBearer}),
		"bind of an unknown box": c.Bind(ctx, "nobody", netip.MustParseAddr("10.0.0.1")),
	} {
		if !errors.As(err, &api) || api.Status/100 != 4 || api.Type == "" {
			t.Errorf("%s: %v, want a typed 4xx", name, err)
		}
	}
}

// TestBroker_Expires: a grant past its Until is refused as expired, and
// no longer live.
func TestBroker_Expires(t *testing.T) {
	r := newRig(t)
	tok := grant(t, r.b, broker.Grant{Box: "b", Until: time.Now().Add(-time.Second)})
	resp := r.do(t, calls[0], tok)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get(broker.RefusalHeader) != string(broker.RefusedExpired) {
		t.Errorf("expired token: %d %s", resp.StatusCode, resp.Header.Get(broker.RefusalHeader))
	}
	grant(t, r.b, broker.Grant{Box: "gone", Until: time.Now().Add(-time.Second)})
	if n := r.b.Live(); n != 0 {
		t.Errorf("Live = %d, want 0", n)
	}
}

// TestAdmin_TransientUpstream: a transient upstream (set through the
// admin API) ends with the revoke of its last box's grant; another
// upstream stays.
func TestAdmin_TransientUpstream(t *testing.T) {
	r := newRig(t)
	sock := filepath.Join(t.TempDir(), "broker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.b.Admin(nil)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := broker.Dial(sock)
	ctx := t.Context()
	for _, u := range []broker.Upstream{
		{Name: "local-run-a", URL: "http://127.0.0.1:9", Key: "k-a", Auth: broker.AuthAsPresented, Transient: true},
		{Name: "kept", URL: "http://127.0.0.1:8", Key: "k-b", Auth: broker.AuthBearer},
	} {
		if err := c.SetUpstream(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	upstreams := func() []string {
		t.Helper()
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Upstreams
	}
	for _, box := range []string{"b1", "b2"} {
		if _, err := c.Grant(ctx, broker.Grant{Box: box, Upstream: "local-run-a", Until: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Grant(ctx, broker.Grant{Box: "b3", Upstream: "kept", Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		revoke string
		has    bool
	}{{"b1", true}, {"b2", false}, {"b3", false}} {
		if err := c.Revoke(ctx, step.revoke); err != nil {
			t.Fatal(err)
		}
		ups := upstreams()
		if slices.Contains(ups, "local-run-a") != step.has || !slices.Contains(ups, "kept") {
			t.Errorf("after revoking %s: upstreams %v; want local-run-a %v, kept always", step.revoke, ups, step.has)
		}
	}
	if _, err := c.Grant(ctx, broker.Grant{Box: "b4", Upstream: "local-run-a"}); err == nil {
		t.Error("a grant of the pruned upstream succeeded")
	}
}

// TestDialTLS_refusals: the admin API over TCP is reached over https only,
// with a client certificate, trusting the broker's own authority only.
func TestDialTLS_refusals(t *testing.T) {
	cert := tls.Certificate{Certificate: [][]byte{{1}}}
	roots := x509.NewCertPool()
	for name, c := range map[string]struct {
		url  string
		conf *tls.Config
	}{
		"plain http":         {"http://broker:9443", &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots}},
		"a path":             {"https://broker:9443/v1", &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots}},
		"credentials":        {"https://u:p@broker:9443", &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots}},
		"no client cert":     {"https://broker:9443", &tls.Config{RootCAs: roots}},
		"the system's roots": {"https://broker:9443", &tls.Config{Certificates: []tls.Certificate{cert}}},
		"no verification":    {"https://broker:9443", &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, InsecureSkipVerify: true}},
		"no config":          {"https://broker:9443", nil},
	} {
		if _, err := broker.DialTLS(c.url, c.conf); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, err := broker.DialTLS("https://broker:9443", &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots})
	if err != nil || !c.Remote() {
		t.Errorf("a good client: %v", err)
	}
}

// TestAdmin_GrantSource: a grant through the admin API binds its token to
// Source in one call; a broker that knows no Source (an earlier version,
// which refuses the field as invalid_body) gets the grant and a Bind.
func TestAdmin_GrantSource(t *testing.T) {
	for _, old := range []bool{false, true} {
		r := newRig(t)
		sock := filepath.Join(t.TempDir(), "broker.sock")
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		admin := r.b.Admin(nil)
		var grants, binds int
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			switch {
			case req.URL.Path == "/v1/grants" && old && strings.Contains(string(body), `"source"`):
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"type":"invalid_body","message":"json: unknown field \"source\""}`))
				return
			case req.URL.Path == "/v1/grants":
				grants++
			case strings.HasSuffix(req.URL.Path, "/bind"):
				binds++
			}
			req.Body = io.NopCloser(strings.NewReader(string(body)))
			admin.ServeHTTP(w, req)
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
		c := broker.Dial(sock)
		elsewhere, err := c.Grant(t.Context(), broker.Grant{Box: "b1", Source: netip.MustParseAddr("127.0.0.9")})
		if err != nil {
			t.Fatalf("old broker %v: Grant: %v", old, err)
		}
		resp := r.do(t, calls[0], elsewhere)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(broker.RefusalHeader) != string(broker.RefusedSource) {
			t.Errorf("old broker %v: a request from another address: %d %q, want 403 %s", old, resp.StatusCode,
				resp.Header.Get(broker.RefusalHeader), broker.RefusedSource)
		}
		if wantBinds := map[bool]int{false: 0, true: 1}[old]; grants != 1 || binds != wantBinds {
			t.Errorf("old broker %v: %d grants and %d binds, want 1 and %d", old, grants, binds, wantBinds)
		}
	}
}
