package pins_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/pins/pinstest"
)

func TestBump(t *testing.T) {
	reg, p := fakeWorld(t)
	publishFakeCLI(reg, "1.1.0")
	publishFakeCLI(reg, "1.2.0") // latest
	client, err := pins.NewRegistry(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	locker := pins.NPMLocker{Registry: reg.URL}

	tests := []struct {
		name, harness, version string
		wantVersion            string
		wantErr                error
	}{
		{"exact version by backend key", "fk", "1.1.0", "1.1.0", nil},
		{"latest by default", "fake", "", "1.2.0", nil},
		{"unknown harness", "nope", "", "", pins.ErrUnknownHarness},
		{"unpublished version", "fake", "9.9.9", "", pins.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.Clone()
			got, err := pins.Bump(t.Context(), p, tt.harness, tt.version, client, locker)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Bump(%s, %q) error = %v, want %v", tt.harness, tt.version, err, tt.wantErr)
			}
			if diff := cmp.Diff(before, p); diff != "" {
				t.Fatalf("Bump changed its input (-before +after):\n%s", diff)
			}
			if err != nil {
				return
			}
			h := got.Harnesses[0]
			if h.Version != tt.wantVersion || h.Proven {
				t.Errorf("Bump() row = version %s proven %v, want %s unproven", h.Version, h.Proven, tt.wantVersion)
			}
			if want := `^` + strings.ReplaceAll(tt.wantVersion, ".", `\.`) + `$`; h.VersionPattern != want {
				t.Errorf("Bump() pattern = %q, want %q", h.VersionPattern, want)
			}
			m, err := client.Manifest(t.Context(), "@acme/fake-cli", tt.wantVersion)
			if err != nil {
				t.Fatal(err)
			}
			if h.Integrity != m.Dist.Integrity {
				t.Errorf("Bump() integrity = %s, registry has %s", h.Integrity, m.Dist.Integrity)
			}
			pm, err := client.Manifest(t.Context(), "@acme/fake-cli-linux-x64", tt.wantVersion)
			if err != nil {
				t.Fatal(err)
			}
			wantPlat := []pins.Package{{Platform: "linux/amd64", Name: "@acme/fake-cli-linux-x64", Version: tt.wantVersion, Integrity: pm.Dist.Integrity}}
			if diff := cmp.Diff(wantPlat, h.Platforms); diff != "" {
				t.Errorf("Bump() platforms (-want +got):\n%s", diff)
			}
			sm, err := client.Manifest(t.Context(), "@acme/fake-sdk", tt.wantVersion)
			if err != nil {
				t.Fatal(err)
			}
			wantWith := []pins.Package{{Name: "@acme/fake-sdk", Version: tt.wantVersion, Integrity: sm.Dist.Integrity}}
			if diff := cmp.Diff(wantWith, h.With); diff != "" {
				t.Errorf("Bump() with (-want +got):\n%s", diff)
			}
			if e, err := h.Lock.Entry("node_modules/@acme/fake-sdk"); err != nil || e.Version != tt.wantVersion {
				t.Errorf("Bump() lock entry of the SDK = %+v, %v; want version %s", e, err, tt.wantVersion)
			}
			e, err := h.Lock.Entry("node_modules/@acme/fake-cli")
			if err != nil || e.Version != tt.wantVersion || !strings.HasPrefix(e.Resolved, reg.URL) {
				t.Errorf("Bump() lock top entry = %+v, %v; want version %s resolved from the registry", e, err, tt.wantVersion)
			}
			if _, err := h.Lock.Entry("node_modules/left-pad"); err != nil {
				t.Errorf("Bump() lock lacks the transitive dependency: %v", err)
			}
			if diff := cmp.Diff(p.Node, got.Node); diff != "" {
				t.Errorf("Bump() touched node pins:\n%s", diff)
			}
		})
	}
}

func TestBump_platformDropped(t *testing.T) {
	reg, p := fakeWorld(t)
	reg.Publish(pinstest.Version{Name: "@acme/fake-cli", Version: "2.0.0", Bin: map[string]string{"fake": "bin/fake.js"}})
	reg.Publish(pinstest.Version{Name: "@acme/fake-sdk", Version: "2.0.0"})
	client, err := pins.NewRegistry(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pins.Bump(t.Context(), p, "fake", "2.0.0", client, pins.NPMLocker{Registry: reg.URL})
	if err == nil || !strings.Contains(err.Error(), "no longer depends on platform package @acme/fake-cli-linux-x64") {
		t.Errorf("Bump() to a release without the platform package = %v, want an error naming it", err)
	}
}

func TestBump_withUnreleased(t *testing.T) {
	reg, p := fakeWorld(t)
	reg.Publish(pinstest.Version{Name: "@acme/fake-cli-linux-x64", Version: "3.0.0", OS: []string{"linux"}, CPU: []string{"x64"}})
	reg.Publish(pinstest.Version{Name: "@acme/fake-cli", Version: "3.0.0", Bin: map[string]string{"fake": "bin/fake.js"},
		OptionalDependencies: map[string]string{"@acme/fake-cli-linux-x64": "3.0.0"}})
	client, err := pins.NewRegistry(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pins.Bump(t.Context(), p, "fake", "3.0.0", client, pins.NPMLocker{Registry: reg.URL})
	if !errors.Is(err, pins.ErrNotFound) || !strings.Contains(err.Error(), "with @acme/fake-sdk") {
		t.Errorf("Bump() to a release without its SDK = %v, want a not-found error naming the SDK", err)
	}
}

func TestNPMLocker_canceled(t *testing.T) {
	reg, _ := fakeWorld(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := pins.NPMLocker{Registry: reg.URL}.Lock(ctx, map[string]string{"@acme/fake-cli": "1.0.0"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Lock() with a canceled context = %v, want context.Canceled", err)
	}
}
