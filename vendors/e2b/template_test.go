package e2b_test

import (
	"context"
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

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
)

const apiKey = "e2b_0123456789abcdef"

// pushRandom pushes a random image to an in-process registry and returns
// its reference.
func pushRandom(t *testing.T) string {
	t.Helper()
	reg := httptest.NewServer(registry.New())
	t.Cleanup(reg.Close)
	img, err := random.Image(1024, 3)
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(reg.URL, "http://") + "/box:test"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

// newEmulator returns an emulator (its template API needs no engine) and a
// client of its control plane; wrap, when not nil, sits in front of it.
func newEmulator(t *testing.T, wrap func(http.Handler) http.Handler) (*e2bemu.Server, *e2b.Vendor) {
	t.Helper()
	emu, err := e2bemu.New(e2bemu.Options{APIKey: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = emu
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); emu.Close() })
	c, err := e2b.New(apiKey, e2b.WithAPIURL(srv.URL),
		e2b.WithPollInterval(20*time.Millisecond),
		e2b.WithRetry(3, 10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return emu, c
}

func TestVendor_BuildFromImage(t *testing.T) {
	image := pushRandom(t)
	tests := []struct {
		name      string
		image     string
		registry  *e2b.Registry
		wantErr   bool
		wantInLog string
	}{
		{"ready", image, nil, false, "Pulled layer 3/3"},
		{"with registry login", image, &e2b.Registry{Type: "registry", Username: "u", Password: "p"}, false, "Pulled layer 1/3"},
		{"missing image", image[:strings.LastIndex(image, ":")] + ":nope", nil, true, "failed to pull image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, c := newEmulator(t, nil)
			var logs []string
			ref, err := c.BuildFromImage(t.Context(), e2b.TemplateRequest{Name: "box", CPUCount: 2, MemoryMB: 1024},
				e2b.BuildStart{FromImage: tt.image, FromImageRegistry: tt.registry},
				func(e e2b.LogEntry) { logs = append(logs, e.Message) })
			var be *e2b.TemplateBuildError
			if got := errors.As(err, &be); got != tt.wantErr {
				t.Fatalf("BuildFromImage() error = %v, want build error %v", err, tt.wantErr)
			}
			if !tt.wantErr && err != nil {
				t.Fatalf("BuildFromImage() = %v", err)
			}
			if ref.TemplateID == "" {
				t.Errorf("BuildFromImage() ref = %+v, want a template id", ref)
			}
			joined := strings.Join(logs, "\n")
			if !strings.Contains(joined, tt.wantInLog) {
				t.Errorf("logs = %q, want %q", joined, tt.wantInLog)
			}
			seen := map[string]bool{}
			for _, l := range logs {
				if seen[l] {
					t.Errorf("log %q streamed twice", l)
				}
				seen[l] = true
			}
			img, status, _ := fake.Build(ref.BuildID)
			want := "ready"
			if tt.wantErr {
				want = "error"
			}
			if img != tt.image || status != want {
				t.Errorf("fake build = %s %s, want %s %s", img, status, tt.image, want)
			}
		})
	}
}

func TestVendor_TemplateErrors(t *testing.T) {
	t.Run("bad key", func(t *testing.T) {
		emu, err := e2bemu.New(e2bemu.Options{APIKey: apiKey})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(emu)
		t.Cleanup(func() { srv.Close(); emu.Close() })
		c, err := e2b.New("e2b_wrong", e2b.WithAPIURL(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateTemplate(t.Context(), e2b.TemplateRequest{Name: "x"})
		var ae *e2b.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.Contains(ae.Message, "Invalid API key") {
			t.Fatalf("CreateTemplate() = %v, want APIError 401 with the body's message", err)
		}
		if strings.Contains(err.Error(), "e2b_wrong") {
			t.Errorf("error %q echoes the API key", err)
		}
	})
	t.Run("unknown build", func(t *testing.T) {
		_, c := newEmulator(t, nil)
		_, err := c.BuildStatus(t.Context(), e2b.TemplateBuildRef{TemplateID: "t", BuildID: "b"}, 0)
		var ae *e2b.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
			t.Fatalf("BuildStatus() = %v, want APIError 404", err)
		}
	})
	t.Run("429 then ok honours Retry-After", func(t *testing.T) {
		var calls atomic.Int32
		_, c := newEmulator(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write([]byte(`{"code":429,"message":"rate limited"}`))
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		if _, err := c.CreateTemplate(t.Context(), e2b.TemplateRequest{Name: "x"}); err != nil {
			t.Fatalf("CreateTemplate() after one 429 = %v, want success", err)
		}
		if got := calls.Load(); got != 2 {
			t.Errorf("calls = %d, want 2", got)
		}
	})
	t.Run("429 forever is bounded", func(t *testing.T) {
		var calls atomic.Int32
		_, c := newEmulator(t, func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Retry-After", "3600")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"code":429,"message":"rate limited"}`))
			})
		})
		start := time.Now()
		_, err := c.CreateTemplate(t.Context(), e2b.TemplateRequest{Name: "x"})
		var ae *e2b.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RetryAfter != time.Hour {
			t.Fatalf("CreateTemplate() = %v, want APIError 429 with Retry-After 1h", err)
		}
		if got := calls.Load(); got != 4 {
			t.Errorf("calls = %d, want 4 (1 + 3 retries)", got)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v, want the wait capped", d)
		}
	})
	t.Run("cancelled wait", func(t *testing.T) {
		_, c := newEmulator(t, nil)
		ref, err := c.CreateTemplate(t.Context(), e2b.TemplateRequest{Name: "x"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		// Never started: the build stays waiting until ctx ends.
		if _, err := c.WaitBuild(ctx, ref, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitBuild() = %v, want deadline exceeded", err)
		}
	})
}

func TestNew_Validates(t *testing.T) {
	tests := []struct {
		name string
		key  string
		opts []e2b.Option
	}{
		{"empty key", "", nil},
		{"bad url", apiKey, []e2b.Option{e2b.WithAPIURL("::")}},
		{"bad domain", apiKey, []e2b.Option{e2b.WithDomain("a/b")}},
		{"bad scheme", apiKey, []e2b.Option{e2b.WithScheme("ftp")}},
		{"bad retry", apiKey, []e2b.Option{e2b.WithRetry(1, time.Second, time.Millisecond)}},
		{"bad poll", apiKey, []e2b.Option{e2b.WithPollInterval(0)}},
		{"dial without a transport", apiKey, []e2b.Option{e2b.WithDial("127.0.0.1:1"),
			e2b.WithHTTPClient(&http.Client{Transport: http.NewFileTransport(http.Dir("/"))})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := e2b.New(tt.key, tt.opts...); err == nil {
				t.Errorf("New(%q) = nil error, want one", tt.key)
			}
		})
	}
}

func TestVendor_ImportImage(t *testing.T) {
	image := pushRandom(t)
	emu, c := newEmulator(t, nil)
	var lines []string
	img, err := c.ImportImage(t.Context(), vendors.ImportRequest{Image: image, Name: "box", Tag: "v1",
		Pull:      vendors.RegistryCredentials{Username: "u", Password: "p"},
		Resources: vendors.Resources{CPUs: 2, MemoryBytes: 1 << 30},
		Progress:  func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	if img.Kind != "template" || img.Reference == "" {
		t.Errorf("ImportImage() = %+v, want a template", img)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "Pulled layer 3/3") {
		t.Errorf("progress = %q, want the build log", lines)
	}
	if _, err := c.ImportImage(t.Context(), vendors.ImportRequest{Image: image[:strings.LastIndex(image, ":")] + ":nope", Name: "box"}); err == nil {
		t.Error("ImportImage(missing image) succeeded")
	}
	_ = emu
}
