package vendorhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

func decode(b []byte, e *vendorhttp.APIError) bool {
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &body) != nil || body.Message == "" {
		return false
	}
	e.Message = body.Message
	return true
}

func newClient(t *testing.T, h http.HandlerFunc, cfg vendorhttp.Config) *vendorhttp.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.Vendor, cfg.BaseURL = "test", srv.URL+"/api"
	c, err := vendorhttp.New(cfg, vendorhttp.WithRetry(3, time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClient_Do(t *testing.T) {
	var calls atomic.Int32
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("X-Key") != "secret" || r.URL.Path != "/api/things" || r.URL.Query().Get("q") != "1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var in map[string]int
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("X-Next-Token", "n")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]int{"got": in["a"]})
	}, vendorhttp.Config{Header: http.Header{"X-Key": {"secret"}}})
	var out struct{ Got int }
	h, err := c.Do(t.Context(), vendorhttp.Call{Method: "POST", Path: "/things", Query: url.Values{"q": {"1"}},
		Body: map[string]int{"a": 7}, Want: http.StatusCreated, Out: &out})
	if err != nil || out.Got != 7 || h.Get("X-Next-Token") != "n" {
		t.Fatalf("Do() = %v, %+v, %v; want 7 and the header", err, out, h)
	}
}

func TestClient_Retries(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		idempotent bool
		status     int
		failures   int32
		wantCalls  int32
		wantErr    bool
	}{
		{"post 429 retried", "POST", false, 429, 2, 3, false},
		{"post 503 not retried", "POST", false, 503, 1, 1, true},
		{"idempotent post 503 retried", "POST", true, 503, 2, 3, false},
		{"get 503 retried", "GET", false, 503, 2, 3, false},
		{"delete 502 retried", "DELETE", false, 502, 1, 2, false},
		{"get 429 bounded", "GET", false, 429, 100, 4, true},
		{"get 404 not retried", "GET", false, 404, 1, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= tt.failures {
					w.Header().Set("Retry-After", "0")
					w.WriteHeader(tt.status)
					_, _ = w.Write([]byte(`{"code":1,"message":"no"}`))
					return
				}
				w.WriteHeader(http.StatusOK)
			}, vendorhttp.Config{DecodeError: decode})
			_, err := c.Do(t.Context(), vendorhttp.Call{Method: tt.method, Path: "/x", Idempotent: tt.idempotent})
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("calls = %d, want %d", got, tt.wantCalls)
			}
			var ae *vendorhttp.APIError
			if tt.wantErr != (err != nil) || tt.wantErr && (!errors.As(err, &ae) || ae.Status != tt.status || ae.Message != "no" || ae.Path != "/api/x") {
				t.Errorf("Do() = %#v, want error %v with status %d", err, tt.wantErr, tt.status)
			}
		})
	}
}

func TestClient_RetryAfterHook(t *testing.T) {
	var calls atomic.Int32
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After-Short", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}, vendorhttp.Config{RetryAfter: vendorhttp.RetryAfterPrefixed("Retry-After")})
	start := time.Now()
	_, err := c.Do(t.Context(), vendorhttp.Call{Method: "GET", Path: "/x"})
	var ae *vendorhttp.APIError
	if !errors.As(err, &ae) || ae.RetryAfter != time.Hour || !ae.Temporary() {
		t.Fatalf("Do() = %v, want a 429 asking for an hour", err)
	}
	if d := time.Since(start); d > 2*time.Second || calls.Load() != 4 {
		t.Errorf("%d calls in %v, want 4 with waits capped", calls.Load(), d)
	}
}

func TestResolve(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Host))
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	tr := http.DefaultTransport.(*http.Transport).Clone()
	vendorhttp.Resolve(tr, "box.test", srv.Listener.Addr().String())
	hc := &http.Client{Transport: tr}
	for _, host := range []string{"box.test", "49983-abc.box.test"} {
		resp, err := hc.Get("http://" + host + ":" + port + "/")
		if err != nil {
			t.Fatalf("GET %s: %v", host, err)
		}
		var b [64]byte
		n, _ := resp.Body.Read(b[:])
		resp.Body.Close()
		if got := string(b[:n]); got != host+":"+port {
			t.Errorf("GET %s reached host %q", host, got)
		}
	}
	if _, err := hc.Get("http://other.invalid:" + port + "/"); err == nil {
		t.Error("GET other.invalid succeeded, want it resolved as usual (and fail)")
	}
}

func TestNew_Validates(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  vendorhttp.Config
		opts []vendorhttp.Option
	}{
		{"no vendor", vendorhttp.Config{BaseURL: "https://x"}, nil},
		{"bad url", vendorhttp.Config{Vendor: "v", BaseURL: "::"}, nil},
		{"no scheme", vendorhttp.Config{Vendor: "v", BaseURL: "x.com"}, nil},
		{"bad retry", vendorhttp.Config{Vendor: "v", BaseURL: "https://x"}, []vendorhttp.Option{vendorhttp.WithRetry(1, time.Second, time.Millisecond)}},
	} {
		if _, err := vendorhttp.New(tt.cfg, tt.opts...); err == nil {
			t.Errorf("New(%s) = nil error, want one", tt.name)
		}
	}
}

func TestClient_Timeout(t *testing.T) {
	const bound = 50 * time.Millisecond
	tests := []struct {
		name      string
		method    string
		hangs     int32 // attempts that never answer
		stallBody bool  // a hanging attempt sends its headers first
		wantCalls int32
		wantErr   bool
	}{
		{"get that never answers", "GET", 100, false, 4, true},
		{"get answered on retry", "GET", 2, false, 3, false},
		{"post not retried", "POST", 100, false, 1, true},
		{"stalled body not retried", "GET", 100, true, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= tt.hangs {
					if tt.stallBody {
						w.WriteHeader(http.StatusOK)
						_, _ = w.Write([]byte(`{"got":`))
						w.(http.Flusher).Flush()
					}
					<-r.Context().Done()
					return
				}
				_ = json.NewEncoder(w).Encode(map[string]int{"got": 1})
			}, vendorhttp.Config{})
			var out struct{ Got int }
			_, err := c.Do(t.Context(), vendorhttp.Call{Method: tt.method, Path: "/x", Out: &out, Timeout: bound})
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("calls = %d, want %d", got, tt.wantCalls)
			}
			var te *vendorhttp.TimeoutError
			switch {
			case !tt.wantErr && (err != nil || out.Got != 1):
				t.Fatalf("Do() = %v, %+v; want the answer", err, out)
			case tt.wantErr && !errors.As(err, &te):
				t.Fatalf("Do() = %v; want a *TimeoutError", err)
			case tt.wantErr && (te.After != bound || te.Method != tt.method || te.Path != "/api/x"):
				t.Fatalf("TimeoutError = %+v", te)
			}
		})
	}
	t.Run("the caller's deadline is not a timeout", func(t *testing.T) {
		c := newClient(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, vendorhttp.Config{})
		ctx, cancel := context.WithTimeout(t.Context(), bound)
		defer cancel()
		_, err := c.Do(ctx, vendorhttp.Call{Method: "GET", Path: "/x", Timeout: time.Minute})
		var te *vendorhttp.TimeoutError
		if err == nil || errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Do() = %v; want the context's deadline", err)
		}
	})
}
