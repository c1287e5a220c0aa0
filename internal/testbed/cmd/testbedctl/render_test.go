package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/goldentest"
	"github.com/tangle-network/boxctl/internal/testbed"
)

// TestKubeconfig: the kubeconfig subcommand writes the client's
// kubeconfig (the golden file is byte for byte what the test bed has
// always written, so a running cluster's daemons see no change), with mode
// 0600, and leaves an unchanged file alone.
func TestKubeconfig(t *testing.T) {
	pki := t.TempDir()
	for name, body := range map[string]string{"ca.crt": "CA\n", "admin.crt": "CERT\n", "admin.key": "KEY\n"} {
		if err := os.WriteFile(filepath.Join(pki, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "admin.kubeconfig")
	args := []string{"kubeconfig", "-pki", pki, "-server", "https://127.0.0.1:6443", "-user", "admin", "-out", out}
	if err := run(t.Context(), args, strings.NewReader(""), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	goldentest.Check(t, filepath.Join("testdata", "admin.kubeconfig.golden"), got)
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), args, strings.NewReader(""), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(out); !os.SameFile(fi, fi2) || fi2.Mode().Perm() != 0o600 {
		t.Errorf("an unchanged kubeconfig was replaced or kept its mode: %v", fi2.Mode())
	}
	if err := run(t.Context(), []string{"kubeconfig", "-pki", pki, "-server", "https://127.0.0.1:6443", "-user", "nobody", "-out", out},
		strings.NewReader(""), &bytes.Buffer{}); err == nil {
		t.Error("kubeconfig for a user without a certificate: no error")
	}
}

// TestCNIConf: the pods' network files, byte for byte.
func TestCNIConf(t *testing.T) {
	dir := t.TempDir()
	args := []string{"cni-conf", "-dir", dir, "-network", "boxctl-testbed", "-bridge", "boxctl-cni0",
		"-subnet", "10.244.0.0/24", "-ipam-dir", "/var/lib/x/ipam"}
	if err := run(t.Context(), args, strings.NewReader(""), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for file, name := range map[string]string{"10-boxctl-testbed.conflist": "boxctl-testbed.conflist", "99-loopback.conf": "99-loopback.conf"} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		goldentest.Check(t, filepath.Join("testdata", name+".golden"), got)
	}
	bad := append(args[:len(args)-4:len(args)-4], "-subnet", "10.244.0.0", "-ipam-dir", "/x")
	if err := run(t.Context(), bad, strings.NewReader(""), &bytes.Buffer{}); err == nil {
		t.Error("cni-conf with a subnet that is no prefix: no error")
	}
}

func TestPodSubnetCheck(t *testing.T) {
	routes := `default via 10.0.2.2 dev eth0 proto dhcp src 10.0.2.15 metric 100
10.0.2.0/24 dev eth0 proto kernel scope link src 10.0.2.15
10.244.0.0/24 dev boxctl-cni0 proto kernel scope link src 10.244.0.1
172.17.0.0/16 dev docker0 proto kernel scope link src 172.17.0.1 linkdown
`
	tests := []struct {
		name, subnet, routes, wantErr string
	}{
		{"free", "10.244.0.0/24", routes, ""},
		{"the pods' own bridge does not count", "10.244.0.0/16", routes, ""},
		{"Docker's network", "172.17.5.0/24", routes, `overlaps the route "172.17.0.0/16 dev docker0`},
		{"a wider subnet over a route", "172.16.0.0/12", routes, "overlaps"},
		{"a host route", "192.168.7.0/24", "192.168.7.9 dev tun0 scope link\n", "overlaps"},
		{"a typed route", "10.9.0.0/16", "unreachable 10.0.0.0/8 metric 10\n", "overlaps"},
		{"a route beside the subnet", "10.244.1.0/24", "10.244.0.0/24 dev eth1\n", ""},
		{"a bridge of a like name counts", "10.244.0.0/24", "10.244.0.0/24 dev boxctl-cni0x\n", "overlaps"},
		{"garbage", "10.244.0.0/24", "not-an-address dev eth0\n", "route"},
		{"no subnet", "nope", routes, "pod subnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), []string{"pod-subnet-check", "-subnet", tt.subnet, "-bridge", "boxctl-cni0"},
				strings.NewReader(tt.routes), &bytes.Buffer{})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error = %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

// TestDirAndWriteState: `dir` prints internal/testbed.Dir, and
// `write-state` writes a file internal/testbed loads.
func TestDirAndWriteState(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BOXCTL_TESTBED_DIR", dir)
	var out bytes.Buffer
	if err := run(t.Context(), []string{"dir"}, strings.NewReader(""), &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != dir || got != testbed.Dir() {
		t.Errorf("dir printed %q, want %q", got, dir)
	}
	file := filepath.Join(dir, testbed.StateFileName)
	args := []string{"write-state", "-file", file, "DOCKER_HOST=unix:///d.sock", "BUILDKIT_HOST=unix:///b.sock",
		"BOXCTL_TEST_REGISTRY=127.0.0.1:5000", "BOXCTL_TEST_BASE_IMAGE=127.0.0.1:5000/boxctl/base@sha256:01",
		"BOXCTL_TEST_NODE_DIR=/n", "BOXCTL_NPM_CACHE=/c", "BOXCTL_TEST_KUBECONFIG=/k", "BOXCTL_TEST_KUBE_AUDIT_LOG=/a",
		"BOXCTL_TEST_KUBECTL=/kubectl"}
	if err := run(t.Context(), args, strings.NewReader(""), &out); err != nil {
		t.Fatal(err)
	}
	env, err := testbed.Load()
	if err != nil {
		t.Fatal(err)
	}
	if env.BaseImage != "127.0.0.1:5000/boxctl/base@sha256:01" || env.Kubectl != "/kubectl" {
		t.Errorf("Load = %+v", env)
	}
	for _, bad := range [][]string{{"write-state", "-file", file}, {"write-state", "-file", file, "NOPE"}, {"dir", "extra"}} {
		if err := run(t.Context(), bad, strings.NewReader(""), &out); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("run(%q) = %v, want a usage error", bad, err)
		}
	}
	if err := run(t.Context(), []string{"write-state", "-file", file, "UNKNOWN=1"}, strings.NewReader(""), &out); !errors.Is(err, testbed.ErrUnknownKey) {
		t.Errorf("write-state UNKNOWN=1 = %v, want ErrUnknownKey", err)
	}
}
