package open_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tangle-network/boxctl/vendors/emukit"
	"github.com/tangle-network/boxctl/vendors/open"
)

// TestFaultSwitch finds the fault switch of the emulator the environment
// names, asked with the control plane's key in its header.
func TestFaultSwitch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := r.Header.Get("X-API-Key") == "ek" && r.URL.Path == emukit.SwitchPath ||
			r.Header.Get("Authorization") == "Bearer dk" && r.URL.Path == "/api"+emukit.SwitchPath
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(emukit.SwitchState{Counts: emukit.Counts{Failed: 7}})
	}))
	defer srv.Close()
	tests := []struct {
		name, target string
		env          map[string]string
		want         bool
	}{
		{"e2b", "e2b", map[string]string{open.EnvE2BKey: "ek", open.EnvE2BURL: srv.URL}, true},
		{"daytona", "daytona", map[string]string{open.EnvDaytonaKey: "dk", open.EnvDaytonaURL: srv.URL + "/api"}, true},
		{"e2b, the vendor's own", "e2b", map[string]string{open.EnvE2BKey: "ek"}, false},
		{"docker", "docker", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sw, ok := open.FaultSwitch(tt.target, open.Options{Getenv: func(k string) string { return tt.env[k] }})
			if ok != tt.want {
				t.Fatalf("FaultSwitch(%s) ok = %v, want %v", tt.target, ok, tt.want)
			}
			if !ok {
				return
			}
			if n, err := sw.FaultCounts(t.Context()); err != nil || n.Failed != 7 {
				t.Errorf("FaultCounts() = %+v, %v; want 7 failed", n, err)
			}
		})
	}
}
