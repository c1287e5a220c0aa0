package main

import (
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/vendors/open"
)

func TestUpCmd_Egress(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string // the policy's summary; "" for none
		wantErr string
	}{
		{name: "none: denied", args: nil, want: "deny"},
		{name: "deny", args: []string{"--egress", "deny"}, want: "deny"},
		{name: "allow list", args: []string{"--allow", "example.com", "--allow", "10.0.0.0/8:22"}, want: "deny+example.com,10.0.0.0/8:22"},
		{name: "deny and allow", args: []string{"--egress", "deny", "--allow", "*.npmjs.org:443"}, want: "deny+*.npmjs.org:443"},
		{name: "open", args: []string{"--egress", "open"}, want: "open"},
		{name: "open on another vendor", args: []string{"--egress", "open", "--target", "e2b"}, want: "open"},
		{name: "open with rules", args: []string{"--egress", "open", "--allow", "example.com"}, wantErr: `"open" allows everything`},
		{name: "unknown mode", args: []string{"--egress", "maybe"}, wantErr: `--egress "maybe": want deny or open`},
		{name: "bad rule", args: []string{"--allow", "example.com:22"}, wantErr: "bad port"},
		{name: "IPv6 rule", args: []string{"--allow", "[::1]:443"}, wantErr: "IPv6 egress is never allowed"},
		{name: "e2b", args: []string{"--allow", "example.com", "--target", "e2b"}, want: "deny+example.com"},
		{name: "daytona", args: []string{"--egress", "deny", "--target", "daytona"}, want: "deny"},
		{name: "kubernetes", args: []string{"--allow", "example.com", "--target", "kubernetes"}, wantErr: "pass --egress open"},
		{name: "kubernetes by default", args: []string{"--target", "kubernetes"}, wantErr: "pass --egress open"},
		{name: "kubernetes open", args: []string{"--egress", "open", "--target", "kubernetes"}, want: "open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, called, err := parseCmd(t, newUpCmd, append([]string{"up", "--router", "local"}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || exitCode(err) != 2 {
					t.Fatalf("up %v: error %v (exit %d), want %q with exit 2", tt.args, err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil || !called {
				t.Fatalf("up %v: %v (called %v)", tt.args, err, called)
			}
			var summary string
			if got.egress != nil {
				summary = got.egress.Summary()
			}
			if summary != tt.want {
				t.Errorf("up %v: egress %q, want %q", tt.args, summary, tt.want)
			}
		})
	}
}

// TestUpCmd_EgressKubernetesRelay: with a relay the pods reach, a
// Kubernetes box is denied by default like any other.
func TestUpCmd_EgressKubernetesRelay(t *testing.T) {
	t.Setenv(open.EnvKubeEgressRelay, "10.99.0.5")
	got, called, err := parseCmd(t, newUpCmd, "up", "--router", "local", "--target", "kubernetes", "--allow", "example.com")
	if err != nil || !called || got.egress == nil || got.egress.Summary() != "deny+example.com" {
		t.Fatalf("up --target kubernetes with a relay: %v, %v (called %v); want deny+example.com", got.egress, err, called)
	}
}

func TestNetCmd_Flags(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		allow, deny int
		wantErr     string
	}{
		{name: "show", args: []string{"last"}},
		{name: "change", args: []string{"last", "--allow", "example.com", "--allow", "10.0.0.1:5432", "--deny", "*.npmjs.org"}, allow: 2, deny: 1},
		{name: "bad rule", args: []string{"last", "--allow", "10.0.0.1/8"}, wantErr: "not an IPv4 address or CIDR"},
		{name: "no box", args: nil, wantErr: "accepts 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, called, err := parseCmd(t, newNetCmd, append([]string{"net"}, tt.args...)...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || exitCode(err) != 2 {
					t.Fatalf("net %v: error %v (exit %d), want %q with exit 2", tt.args, err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil || !called || got.box != "last" || len(got.allow) != tt.allow || len(got.deny) != tt.deny {
				t.Errorf("net %v = %+v, %v (called %v)", tt.args, got, err, called)
			}
		})
	}
}
