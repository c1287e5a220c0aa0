package daytona_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonafake"
)

const apiKey = "dtn_0123456789abcdef"

func setup(t *testing.T, wrap func(http.Handler) http.Handler) (string, *daytona.SnapshotClient) {
	t.Helper()
	reg := httptest.NewServer(registry.New())
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	fake := daytonafake.NewSnapshotServer(daytonafake.SnapshotOptions{APIKey: apiKey, Registry: host})
	var h http.Handler = fake
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); fake.Close() })
	c, err := daytona.NewSnapshotClient(apiKey, daytona.WithSnapshotBaseURL(srv.URL),
		daytona.WithSnapshotPollInterval(20*time.Millisecond),
		daytona.WithSnapshotRetry(2, 10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return host, c
}

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

func TestSnapshotClient_PushAndCreate(t *testing.T) {
	host, c := setup(t, nil)
	pa, err := c.RegistryPushAccess(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if pa.RegistryURL != host || pa.Secret == "" || strings.Contains(pa.String(), pa.Secret) {
		t.Fatalf("RegistryPushAccess() = %v, want registry %s with a hidden secret", pa, host)
	}
	image := pa.Repository("box") + ":v1"
	push(t, image)

	tests := []struct {
		name, snap, image string
		wantState         string
	}{
		{"active", "box-v1", image, daytona.SnapshotActive},
		{"missing image", "box-gone", pa.Repository("box") + ":gone", daytona.SnapshotError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.CreateSnapshot(t.Context(), daytona.CreateSnapshot{Name: tt.snap, ImageName: tt.image})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.WaitSnapshot(t.Context(), s.Name)
			if got.State != tt.wantState {
				t.Fatalf("WaitSnapshot() state = %s (err %v), want %s", got.State, err, tt.wantState)
			}
			var fe *daytona.SnapshotFailedError
			if failed := errors.As(err, &fe); failed != (tt.wantState != daytona.SnapshotActive) {
				t.Fatalf("WaitSnapshot() error = %v", err)
			}
			if tt.wantState == daytona.SnapshotActive && (got.Size == nil || *got.Size <= 0) {
				t.Errorf("active snapshot size = %v, want > 0", got.Size)
			}
		})
	}
}

func TestSnapshotClient_Errors(t *testing.T) {
	_, c := setup(t, nil)
	tests := []struct {
		name       string
		req        daytona.CreateSnapshot
		wantStatus int
	}{
		{"latest tag", daytona.CreateSnapshot{Name: "a", ImageName: "127.0.0.1:1/x:latest"}, 400},
		{"no tag", daytona.CreateSnapshot{Name: "a", ImageName: "127.0.0.1:1/x"}, 400},
		{"no image", daytona.CreateSnapshot{Name: "a"}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CreateSnapshot(t.Context(), tt.req)
			var ae *daytona.SnapshotAPIError
			if !errors.As(err, &ae) || ae.Status != tt.wantStatus || ae.Err == "" {
				t.Fatalf("CreateSnapshot(%+v) = %v, want SnapshotAPIError %d", tt.req, err, tt.wantStatus)
			}
		})
	}
	t.Run("not found", func(t *testing.T) {
		_, err := c.Snapshot(t.Context(), "nope")
		var ae *daytona.SnapshotAPIError
		if !errors.As(err, &ae) || ae.Status != 404 || ae.Path != "/api/snapshots/nope" {
			t.Fatalf("Snapshot(nope) = %#v, want 404 with path", err)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		fake := daytonafake.NewSnapshotServer(daytonafake.SnapshotOptions{APIKey: apiKey, Registry: "r"})
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		bad, err := daytona.NewSnapshotClient("wrong-key", daytona.WithSnapshotBaseURL(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.RegistryPushAccess(t.Context())
		var ae *daytona.SnapshotAPIError
		if !errors.As(err, &ae) || ae.Status != 401 || strings.Contains(err.Error(), "wrong-key") {
			t.Fatalf("RegistryPushAccess() = %v, want 401 without the key", err)
		}
	})
	t.Run("throttled with Retry-After-<throttler>", func(t *testing.T) {
		var calls atomic.Int32
		_, c := setup(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.Header().Set("Retry-After-Short", "0")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		if _, err := c.RegistryPushAccess(t.Context()); err != nil || calls.Load() != 2 {
			t.Fatalf("RegistryPushAccess() = %v after %d calls, want success after 2", err, calls.Load())
		}
	})
}
