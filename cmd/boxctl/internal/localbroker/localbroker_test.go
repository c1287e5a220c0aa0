package localbroker

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/brokertls"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// serve runs Serve in the background and waits for its admin API.
func serve(t *testing.T, o Options) (<-chan error, *broker.Client) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), o) }()
	polltest.Until(t, 10*time.Second, "the broker's admin API", func() bool { return answers(t.Context(), o.Admin) })
	return done, broker.Dial(o.Admin)
}

// TestServe: the admin socket is the user's only (0600 in a 0700
// directory), a second broker on it is refused, and the broker ends once
// its socket is gone.
func TestServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "broker")
	sock := filepath.Join(dir, "broker.sock")
	done, c := serve(t, Options{Admin: sock, Idle: time.Hour})
	for path, want := range map[string]os.FileMode{dir: 0o700, sock: 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	if err := Serve(t.Context(), Options{Admin: sock}); err == nil || !strings.Contains(err.Error(), "another broker") {
		t.Errorf("a second broker on the socket = %v, want a refusal", err)
	}
	url, err := c.Listen(t.Context(), "127.0.0.1")
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("Listen = %q, %v", url, err)
	}
	if _, err := c.Listen(t.Context(), "not-an-ip"); err == nil {
		t.Error("Listen on a name, not an address, was accepted")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the broker still runs after its socket was removed")
	}
	var api *broker.APIError
	if _, err := c.Status(t.Context()); err == nil || errors.As(err, &api) {
		t.Errorf("Status after the end = %v, want no answer", err)
	}
}

// TestServe_KeepAwake: a caller at work (KeepAwake) keeps a broker with no
// box past its idle time; once it stops, the broker ends.
func TestServe_KeepAwake(t *testing.T) {
	const idle = time.Second
	done, c := serve(t, Options{Admin: filepath.Join(t.TempDir(), "broker.sock"), Idle: idle})
	stop := KeepAwake(t.Context(), c, idle/5)
	select {
	case err := <-done:
		t.Fatalf("the broker ended while a caller kept it awake: %v", err)
	case <-time.After(3 * idle):
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(10 * idle):
		t.Fatal("the broker still runs long past its idle time")
	}
}

// TestServe_remoteAdmin: a broker with its admin API on TCP behind mutual
// TLS only (a cluster's) serves a client of its CA (a grant, the fixed
// box URL for any host, upstreams of its own from the start), never one
// without a certificate, and not the gates API; without a client CA it
// does not start.
func TestServe_remoteAdmin(t *testing.T) {
	certs := t.TempDir()
	if err := brokertls.Write(certs, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	srvConf, err := brokertls.ServerConfig(filepath.Join(certs, brokertls.Server))
	if err != nil {
		t.Fatal(err)
	}
	cliConf, err := brokertls.ClientConfig(filepath.Join(certs, brokertls.Client))
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + boxbridgetest.FreePort(t)
	const boxURL = "http://10.96.0.20:80"
	up := broker.Upstream{Name: "router-x", URL: "http://127.0.0.1:1", Key: "sk-from-env", Auth: broker.AuthAsPresented}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{AdminAddr: addr, AdminTLS: srvConf, BoxURL: boxURL, Upstreams: []broker.Upstream{up}})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	c, err := broker.DialTLS("https://"+addr, cliConf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	polltest.Until(t, 10*time.Second, "the remote admin API", func() bool { _, err := c.Status(t.Context()); return err == nil })
	st, err := c.Status(t.Context())
	if err != nil || len(st.Upstreams) != 1 || st.Upstreams[0] != up.Name {
		t.Errorf("Status = %+v, %v; want the upstream of the start", st, err)
	}
	if tok, err := c.Grant(t.Context(), broker.Grant{Box: "b1", Upstream: up.Name}); err != nil || tok == "" {
		t.Errorf("Grant = %q, %v", tok, err)
	}
	for _, host := range []string{"", "172.17.0.1"} {
		if u, err := c.Listen(t.Context(), host); err != nil || u != boxURL {
			t.Errorf("Listen(%q) = %q, %v; want the box URL %s", host, u, err, boxURL)
		}
	}
	if !c.Remote() {
		t.Error("a client over TCP is not Remote")
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cliConf.RootCAs, MinVersion: tls.VersionTLS13}}}
	if resp, err := noCert.Get("https://" + addr + "/v1/status"); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %d", resp.StatusCode)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cliConf}}
	resp, err := hc.Get("https://" + addr + "/v1/gates/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the gates API over TCP answered %d, want 404", resp.StatusCode)
	}
	hc.CloseIdleConnections()

	for name, o := range map[string]Options{
		"no admin at all":     {},
		"TCP without TLS":     {AdminAddr: "127.0.0.1:0"},
		"TLS without a CA":    {AdminAddr: "127.0.0.1:0", AdminTLS: &tls.Config{}},
		"a malformed box URL": {AdminAddr: "127.0.0.1:0", AdminTLS: srvConf, BoxURL: "http://$(BOXCTL_BROKER_SERVICE_HOST):$(X)"},
	} {
		if err := Serve(t.Context(), o); err == nil {
			t.Errorf("%s: Serve started", name)
		}
	}
}
