package open_test

import (
	"testing"

	"github.com/tangle-network/boxctl/vendors/open"
)

// TestEmulatorControlPlane finds the control plane the environment names
// and the header its key goes in.
func TestEmulatorControlPlane(t *testing.T) {
	tests := []struct {
		name, target string
		env          map[string]string
		want         open.ControlPlane
		ok           bool
	}{
		{"e2b", "e2b", map[string]string{open.EnvE2BKey: "ek", open.EnvE2BURL: "http://127.0.0.1:1"},
			open.ControlPlane{URL: "http://127.0.0.1:1", Header: "X-API-Key", Value: "ek"}, true},
		{"daytona", "daytona", map[string]string{open.EnvDaytonaKey: "dk", open.EnvDaytonaURL: "http://127.0.0.1:2/api"},
			open.ControlPlane{URL: "http://127.0.0.1:2/api", Header: "Authorization", Value: "Bearer dk"}, true},
		{"e2b, the vendor's own", "e2b", map[string]string{open.EnvE2BKey: "ek"}, open.ControlPlane{}, false},
		{"docker", "docker", nil, open.ControlPlane{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, ok := open.EmulatorControlPlane(tt.target, open.Options{Getenv: func(k string) string { return tt.env[k] }})
			if ok != tt.ok || (ok && cp != tt.want) {
				t.Errorf("EmulatorControlPlane(%s) = %+v, %v; want %+v, %v", tt.target, cp, ok, tt.want, tt.ok)
			}
		})
	}
}
