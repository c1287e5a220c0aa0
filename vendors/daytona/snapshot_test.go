package daytona_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

func push(t *testing.T, ref string) {
	t.Helper()
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// TestVendor_ImportImage publishes through the emulator: push access to
// its registry, a snapshot that pulls the pushed image, and the refusals.
func TestVendor_ImportImage(t *testing.T) {
	t.Parallel()
	emu, v := emulator(t, daytonaemu.Options{})
	repo := "import-" + vendortest.RunTag(t)
	ref, creds, err := v.PushTarget(t.Context(), "boxctl/"+repo, "v1")
	if err != nil {
		t.Fatal(err)
	}
	user, secret := emu.PushCredentials()
	if !strings.HasSuffix(ref, "/daytona/"+repo+":v1") || creds.Username != user || creds.Password != secret || strings.Contains(creds.String(), secret) {
		t.Fatalf("PushTarget = %s, %v; want the registry's daytona project with the emulator's credentials", ref, creds)
	}
	push(t, ref)

	tests := []struct {
		name, image, tag string
		check            func(t *testing.T, img vendors.ImportedImage, err error)
	}{
		{"active", ref, "v1", func(t *testing.T, img vendors.ImportedImage, err error) {
			if err != nil || img.Reference != repo+"-v1" || img.Kind != "snapshot" {
				t.Fatalf("ImportImage = %+v, %v; want snapshot %s-v1", img, err, repo)
			}
			s, err := v.Snapshot(t.Context(), img.Reference)
			if err != nil || s.State != daytona.SnapshotActive || s.Size == nil || *s.Size <= 0 {
				t.Errorf("Snapshot(%s) = %+v, %v; want active with a size", img.Reference, s, err)
			}
		}},
		{"missing image", strings.TrimSuffix(ref, ":v1") + ":gone", "gone", func(t *testing.T, img vendors.ImportedImage, err error) {
			var fe *daytona.SnapshotFailedError
			if !errors.As(err, &fe) || fe.State != daytona.SnapshotError || fe.Reason == "" || img.Reference != repo+"-gone" {
				t.Fatalf("ImportImage = %+v, %v; want a *SnapshotFailedError with the pull's reason", img, err)
			}
		}},
		{"latest tag", strings.TrimSuffix(ref, ":v1") + ":latest", "latest", func(t *testing.T, _ vendors.ImportedImage, err error) {
			var ae *daytona.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "Bad Request" {
				t.Fatalf("ImportImage = %v, want a 400", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, err := v.ImportImage(t.Context(), vendors.ImportRequest{Image: tt.image, Name: "boxctl/" + repo, Tag: tt.tag})
			tt.check(t, img, err)
		})
	}
	t.Run("a second snapshot of the name", func(t *testing.T) {
		_, err := v.ImportImage(t.Context(), vendors.ImportRequest{Image: ref, Name: "boxctl/" + repo, Tag: "v1"})
		var ae *daytona.APIError
		if !errors.As(err, &ae) || ae.Status != 409 {
			t.Fatalf("ImportImage(again) = %v, want a 409", err)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		bad, err := daytona.New("wrong-key", daytona.WithAPIURL(emu.APIURL()))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = bad.PushTarget(t.Context(), "box", "v1")
		var ae *daytona.APIError
		if !errors.As(err, &ae) || ae.Status != 401 || strings.Contains(err.Error(), "wrong-key") {
			t.Fatalf("PushTarget = %v, want 401 without the key", err)
		}
	})
}
