package brokertls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// serveMTLS serves 204 behind ServerConfig(dir/server).
func serveMTLS(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	conf, err := ServerConfig(filepath.Join(dir, Server))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	srv.TLS = conf
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestWrite_mutualTLS: a client of the CA reaches the server; one without
// a certificate, or with another CA's, is refused in the handshake; the
// client refuses a server of another CA. Keys are the user's only, and a
// second Write into the directory replaces nothing.
func TestWrite_mutualTLS(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		if err := Write(d, []string{"broker.test", "127.0.0.1"}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	srv := serveMTLS(t, dir)
	get := func(conf *tls.Config) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 10 * time.Second}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(srv.URL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	mine, err := ClientConfig(filepath.Join(dir, Client))
	if err != nil {
		t.Fatal(err)
	}
	if err := get(mine); err != nil {
		t.Fatalf("the CA's client: %v", err)
	}
	foreign, err := ClientConfig(filepath.Join(other, Client))
	if err != nil {
		t.Fatal(err)
	}
	noCert := &tls.Config{RootCAs: mine.RootCAs, MinVersion: tls.VersionTLS13}
	otherCA := &tls.Config{RootCAs: mine.RootCAs, Certificates: foreign.Certificates, MinVersion: tls.VersionTLS13}
	for name, conf := range map[string]*tls.Config{"no certificate": noCert, "another CA's certificate": otherCA} {
		if err := get(conf); err == nil {
			t.Errorf("a client with %s was served", name)
		}
	}
	if err := get(foreign); err == nil {
		t.Error("a client of another CA trusted the server")
	} else if _, unknown := errors.AsType[x509.UnknownAuthorityError](err); !unknown {
		var ce *tls.CertificateVerificationError
		if !errors.As(err, &ce) {
			t.Errorf("a client of another CA: %v, want a verification error", err)
		}
	}
	for _, p := range []string{CAKey, filepath.Join(Server, KeyFile), filepath.Join(Client, KeyFile)} {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", p, fi.Mode(), err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, Client, CertFile))
	if _, exists := errors.AsType[*ExistsError](Write(dir, []string{"x"}, time.Hour)); !exists {
		t.Error("a second Write into the directory is not an *ExistsError")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, Client, CertFile)); string(after) != string(before) {
		t.Error("a refused Write replaced the client certificate")
	}
}

// TestWrite_hosts: the server certificate names every host, names as DNS
// names and addresses as IPs; bad arguments are refused.
func TestWrite_hosts(t *testing.T) {
	dir := t.TempDir()
	hosts := DefaultHosts("ns", "svc")
	if err := Write(dir, hosts, time.Hour); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, Server, CertFile), filepath.Join(dir, Server, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"svc.ns.svc", "svc.ns.svc.cluster.local", "localhost", "127.0.0.1"} {
		if err := cert.VerifyHostname(h); err != nil {
			t.Errorf("the server certificate does not name %s: %v", h, err)
		}
	}
	if err := cert.VerifyHostname("evil.example"); err == nil {
		t.Error("the server certificate names evil.example")
	}
	for name, call := range map[string]func() error{
		"no host":     func() error { return Write(t.TempDir(), nil, time.Hour) },
		"no validity": func() error { return Write(t.TempDir(), []string{"h"}, 0) },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
