package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/emukit"
	"github.com/tangle-network/boxctl/vendors/open"
)

// TestEmulate_Serves runs each `boxctl emulate VENDOR` on its one command
// path: it prints the environment with a fresh key, its control plane
// answers that key, the environment's variables agree (this machine's
// address on the sandboxes' network among them), its fault switch answers
// as open.EmulatorControlPlane finds it, and it ends cleanly with its context
// (Ctrl-C).
func TestEmulate_Serves(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("DOCKER_HOST", env.DockerHost)
	tests := []struct {
		vendor, urlVar, keyVar, prefix, hostVar string
		path                                    string // of a list call, after the URL
		auth                                    func(r *http.Request, key string)
		agree                                   func(printed map[string]string) bool
	}{
		{"e2b", open.EnvE2BURL, open.EnvE2BKey, "e2b_", open.EnvE2BHost, "/v2/sandboxes",
			func(r *http.Request, key string) { r.Header.Set("X-API-Key", key) },
			func(p map[string]string) bool {
				return p[open.EnvE2BSandboxURL] == p[open.EnvE2BURL] && "http://"+p[open.EnvE2BDial] == p[open.EnvE2BURL] &&
					p[open.EnvE2BDomain] == "e2b.local"
			}},
		{"daytona", open.EnvDaytonaURL, open.EnvDaytonaKey, "dtn_", open.EnvDaytonaHost, "/sandbox",
			func(r *http.Request, key string) { r.Header.Set("Authorization", "Bearer "+key) },
			func(p map[string]string) bool {
				return strings.HasSuffix(p[open.EnvDaytonaURL], "/api") && p[open.EnvDaytonaTarget] != ""
			}},
	}
	for _, tt := range tests {
		t.Run(tt.vendor, func(t *testing.T) {
			printed, stop := startEmulate(t, tt.keyVar, tt.vendor)
			defer stop()
			u, key := printed[tt.urlVar], printed[tt.keyVar]
			if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasPrefix(key, tt.prefix) || !tt.agree(printed) {
				t.Fatalf("printed %v, want the URL, a fresh %s key and variables that agree", printed, tt.prefix)
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u+tt.path, nil)
			tt.auth(req, key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s with the printed key = %d %s, want 200", tt.path, resp.StatusCode, b)
			}
			if ip := net.ParseIP(printed[tt.hostVar]); ip == nil || ip.To4() == nil {
				t.Errorf("printed %s=%q, want an IPv4 address", tt.hostVar, printed[tt.hostVar])
			}
			cp, ok := open.EmulatorControlPlane(tt.vendor, open.Options{Getenv: func(k string) string { return printed[k] }})
			if !ok {
				t.Fatalf("no control plane in the printed environment %v", printed)
			}
			sw, err := emukit.NewSwitch(cp.URL, cp.Header, cp.Value, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sw.FaultCounts(t.Context()); err != nil {
				t.Errorf("the fault switch with the printed key: %v", err)
			}
		})
	}
}

// startEmulate runs `boxctl emulate VENDOR ARGS` on the test bed's
// network with a fresh key (keyVar unset) and returns the environment it
// printed. stop ends it with its context (Ctrl-C) and checks that it
// exits 0 within a minute and never logged the key.
func startEmulate(t *testing.T, keyVar string, args ...string) (printed map[string]string, stop func()) {
	t.Helper()
	t.Setenv(keyVar, "")
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut lockedBuffer
	done := make(chan cmdResult, 1)
	go func() {
		done <- boxctlTo(t, ctx, nil, &out, &errOut, append([]string{"emulate"}, append(args, "--network", "boxctl-test", "-o", "json")...)...)
	}()
	polltest.Until(t, 30*time.Second, "the emulator's environment", func() bool {
		return json.Unmarshal([]byte(out.String()), &printed) == nil
	})
	return printed, func() {
		t.Helper()
		cancel()
		select {
		case r := <-done:
			if r.code != 0 {
				t.Errorf("emulate %v after its context ended: exit %d, %v", args, r.code, r.err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("emulate %v still runs a minute after its context ended", args)
		}
		if strings.Contains(errOut.String(), printed[keyVar]) {
			t.Error("the key is in the log")
		}
	}
}
