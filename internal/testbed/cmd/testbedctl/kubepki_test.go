package main

import (
	"bytes"
	"crypto/x509"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServiceIP(t *testing.T) {
	tests := []struct {
		cidr, want string
	}{
		{"10.96.0.0/24", "10.96.0.1"},
		{"10.96.0.7/12", "10.96.0.1"},
		{"10.0.0.0/31", "10.0.0.1"},
		{"10.0.0.0/32", ""},
		{"fd00::/64", ""},
		{"10.96.0.0", ""},
	}
	for _, tt := range tests {
		got, err := serviceIP(tt.cidr)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("serviceIP(%q) = %v, want an error", tt.cidr, got)
		case tt.want != "" && (err != nil || got.String() != tt.want):
			t.Errorf("serviceIP(%q) = %v, %v, want %s", tt.cidr, got, err, tt.want)
		}
	}
}

// TestKubePKI: a new PKI verifies (every certificate signed by the CA for
// its usage, with its names); a second run keeps it; one for another
// service CIDR or with a certificate gone is made anew.
func TestKubePKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	pki := func(cidr string) {
		t.Helper()
		if err := run(t.Context(), []string{"kube-pki", "-dir", dir, "-service-cidr", cidr}, strings.NewReader(""), &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pki("10.96.0.0/24")
	specs := kubeCerts("localhost", netip.MustParseAddr("10.96.0.1"))
	if err := checkPKI(dir, specs, time.Now()); err != nil {
		t.Fatalf("a new PKI does not check: %v", err)
	}
	api, err := readCert(filepath.Join(dir, "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := api.VerifyHostname("kubernetes.default.svc"); err != nil {
		t.Error(err)
	}
	if err := api.VerifyHostname("10.96.0.1"); err != nil {
		t.Error(err)
	}
	node, err := readCert(filepath.Join(dir, "node.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if node.Subject.CommonName != "system:node:localhost" || len(node.Subject.Organization) != 1 || node.Subject.Organization[0] != "system:nodes" {
		t.Errorf("node subject = %v", node.Subject)
	}
	if len(node.ExtKeyUsage) != 1 || node.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("node usage = %v, want client auth", node.ExtKeyUsage)
	}
	for _, key := range []string{"ca.key", "admin.key", "sa.key"} {
		if fi, err := os.Stat(filepath.Join(dir, key)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v, want 0600", key, err, fi.Mode().Perm())
		}
	}
	if !bytes.HasPrefix(read("sa.pub"), []byte("-----BEGIN PUBLIC KEY-----")) {
		t.Errorf("sa.pub is no PEM public key")
	}

	ca := read("ca.crt")
	pki("10.96.0.0/24")
	if !bytes.Equal(read("ca.crt"), ca) {
		t.Error("a second run made the PKI again, want it kept")
	}
	pki("10.97.0.0/24")
	if bytes.Equal(read("ca.crt"), ca) {
		t.Error("another service CIDR kept the PKI, want a new one")
	}
	ca = read("ca.crt")
	if err := os.Remove(filepath.Join(dir, "scheduler.key")); err != nil {
		t.Fatal(err)
	}
	pki("10.97.0.0/24")
	if bytes.Equal(read("ca.crt"), ca) {
		t.Error("a PKI without a key was kept, want a new one")
	}
	if err := checkPKI(dir, specs, time.Now()); err == nil {
		t.Error("checkPKI accepted a PKI for another service address")
	}
	if err := checkPKI(dir, kubeCerts("localhost", netip.MustParseAddr("10.97.0.1")), time.Now().Add(certValidity)); err == nil {
		t.Error("checkPKI accepted certificates at their end")
	}
}
