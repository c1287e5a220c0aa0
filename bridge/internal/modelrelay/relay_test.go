package modelrelay

import (
	"bufio"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// seen is what the upstream received.
type seen struct {
	path, query string
	header      http.Header
	body        string
}

func upstreamServer(t *testing.T) (*httptest.Server, chan seen) {
	t.Helper()
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(b)}
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func startRelay(t *testing.T) *Relay {
	t.Helper()
	r, err := Start(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestRelay_Keys(t *testing.T) {
	for _, tc := range []struct {
		name      string
		path      string
		header    map[string]string
		wantQuery string
		want      map[string]string // header: value at the upstream ("" absent)
	}{
		{"x-api-key", "/v1/messages", map[string]string{"X-Api-Key": Placeholder},
			"", map[string]string{"X-Api-Key": "tok", "Authorization": ""}},
		{"bearer", "/v1/responses", map[string]string{"Authorization": "Bearer " + Placeholder},
			"", map[string]string{"Authorization": "Bearer tok", "X-Api-Key": ""}},
		{"goog header", "/v1beta/models/m:generateContent", map[string]string{"X-Goog-Api-Key": Placeholder},
			"", map[string]string{"X-Goog-Api-Key": "tok"}},
		{"goog query", "/v1beta/models/m:streamGenerateContent?alt=sse&key=" + Placeholder, nil,
			"alt=sse&key=tok", map[string]string{"X-Goog-Api-Key": "", "Authorization": ""}},
		{"none presented", "/v1/messages", map[string]string{"Anthropic-Version": "2023-06-01"},
			"", map[string]string{"Authorization": "", "X-Api-Key": "", "Anthropic-Version": "2023-06-01"}},
		{"proxy authorization dropped", "/v1/messages", map[string]string{"X-Api-Key": Placeholder, "Proxy-Authorization": "Basic eA=="},
			"", map[string]string{"X-Api-Key": "tok", "Proxy-Authorization": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, got := upstreamServer(t)
			r := startRelay(t)
			if err := r.Set(up.URL+"/prefix/", "tok"); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, r.URL()+tc.path, strings.NewReader(`{"x":1}`))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || string(b) != "answer" {
				t.Fatalf("answer %d %q", res.StatusCode, b)
			}
			s := <-got
			wantPath, _, _ := strings.Cut(tc.path, "?")
			if s.path != "/prefix"+wantPath || s.query != tc.wantQuery || s.body != `{"x":1}` {
				t.Errorf("upstream got %s?%s %q; want /prefix%s?%s", s.path, s.query, s.body, wantPath, tc.wantQuery)
			}
			for k, v := range tc.want {
				if g := s.header.Get(k); g != v {
					t.Errorf("%s = %q, want %q", k, g, v)
				}
			}
		})
	}
}

// TestRelay_WaitsForSet: a request before the claim waits for the
// upstream; a later Set (a rotated token) takes over.
func TestRelay_WaitsForSet(t *testing.T) {
	up, got := upstreamServer(t)
	r := startRelay(t)
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, r.URL()+"/v1/messages", strings.NewReader("{}"))
		req.Header.Set("X-Api-Key", Placeholder)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		res.Body.Close()
		done <- result{status: res.StatusCode}
	}()
	if err := r.Set(up.URL, "first"); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || res.status != 200 {
		t.Fatalf("request before Set: %+v", res)
	}
	if k := (<-got).header.Get("X-Api-Key"); k != "first" {
		t.Errorf("key %q, want first", k)
	}
	if err := r.Set(up.URL, "rotated"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, r.URL()+"/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", Placeholder)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if k := (<-got).header.Get("X-Api-Key"); k != "rotated" {
		t.Errorf("key %q after a second Set, want rotated", k)
	}
}

// TestRelay_Streams: the answer reaches the harness as the upstream
// flushes it, not when it ends.
func TestRelay_Streams(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "event: two\n\n")
	}))
	defer up.Close()
	defer close(release)
	r := startRelay(t)
	if err := r.Set(up.URL, "tok"); err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(r.URL()+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || line != "event: one\n" {
		t.Fatalf("first line %q, %v; want it before the upstream ends", line, err)
	}
}

func TestRelay_Refusals(t *testing.T) {
	r := startRelay(t)
	for _, bad := range []string{"", "ftp://x", "http://", "::"} {
		if err := r.Set(bad, "k"); err == nil {
			t.Errorf("Set(%q) = nil, want an error", bad)
		}
	}
	up, _ := upstreamServer(t)
	if err := r.Set(up.URL, "k"); err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(r.URL()+"/v1/messages", "application/json", strings.NewReader(strings.Repeat("x", MaxBodyBytes+1)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized body: %d, want 413", res.StatusCode)
	}
}

// TestRelay_TLS: an https upstream is reached when its authority is among
// the relay's trusted certificates, and refused (502) when it is not.
func TestRelay_TLS(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "over tls")
	}))
	t.Cleanup(up.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: up.Certificate().Raw})
	for _, tc := range []struct {
		name   string
		ca     []byte
		status int
	}{
		{"trusted", ca, http.StatusOK},
		{"untrusted", nil, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Start(nil, tc.ca)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close() })
			if err := r.Set(up.URL, "tok"); err != nil {
				t.Fatal(err)
			}
			res, err := http.Post(r.URL()+"/v1/messages", "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d", res.StatusCode, tc.status)
			}
		})
	}
	if _, err := Start(nil, []byte("not a certificate")); err == nil {
		t.Error("Start with no PEM certificate in ca = nil, want an error")
	}
}
