package routerstub_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/internal/routerstub"
)

// paths has one model path per family and the body it needs.
var paths = []struct {
	family routerstub.Family
	path   string
	body   string
}{
	{routerstub.FamilyAnthropic, "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
	{routerstub.FamilyResponses, "/v1/responses", `{"model":"m","input":"hi"}`},
	{routerstub.FamilyChat, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
}

func TestServer_Auth(t *testing.T) {
	tests := []struct {
		name       string
		header     []string
		wantStatus int
		wantKind   routerstub.AuthKind
	}{
		{"x-api-key", []string{"X-Api-Key", testKey}, 200, routerstub.AuthAPIKey},
		{"bearer", []string{"Authorization", "Bearer " + testKey}, 200, routerstub.AuthBearer},
		{"second key", []string{"Authorization", "Bearer other-key"}, 200, routerstub.AuthBearer},
		{"no key", []string{"X-Nothing", "x"}, 401, routerstub.AuthNone},
		{"wrong key", []string{"X-Api-Key", "sk-wrong"}, 401, routerstub.AuthAPIKey},
		{"basic auth", []string{"Authorization", "Basic " + testKey}, 401, routerstub.AuthNone},
	}
	for _, p := range paths {
		for _, tt := range tests {
			t.Run(string(p.family)+"/"+tt.name, func(t *testing.T) {
				srv, hs := newStubWith(t, routerstub.Options{Script: routerstub.NewQueue(routerstub.Text("ok")), Keys: []string{"other-key"}})
				resp := post(t, hs, p.path, p.body, tt.header...)
				if resp.StatusCode != tt.wantStatus {
					t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
				}
				r := srv.Requests()[0]
				if r.AuthKind != tt.wantKind || r.Authorized != (tt.wantStatus == 200) {
					t.Errorf("recorded auth %q authorized %v", r.AuthKind, r.Authorized)
				}
				if tt.wantStatus == 200 {
					return
				}
				body := decode(t, resp)
				if p.family == routerstub.FamilyAnthropic {
					if body["type"] != "error" || get(body, "error", "type") != "authentication_error" || get(body, "error", "message") == "" {
						t.Errorf("401 body = %v, want the Anthropic authentication_error shape", body)
					}
					return
				}
				e, _ := body["error"].(map[string]any)
				wantCode := any("invalid_api_key")
				if tt.wantKind == routerstub.AuthNone {
					wantCode = nil
				}
				if e["type"] != "invalid_request_error" || e["code"] != wantCode || e["message"] == "" {
					t.Errorf("401 body = %v, want the OpenAI invalid_request_error shape with code %v", body, wantCode)
				}
				for _, k := range []string{"message", "type", "param", "code"} {
					if _, ok := e[k]; !ok {
						t.Errorf("401 error lacks %q: %v", k, e)
					}
				}
				if strings.Contains(fmt.Sprint(body), "sk-wrong") {
					t.Errorf("401 body echoes the key: %v", body)
				}
			})
		}
	}
}

func TestServer_UnknownPath(t *testing.T) {
	srv, hs := newStub(t, routerstub.NewQueue(routerstub.Text("ok")))
	for _, tt := range []struct {
		method, path string
		header       []string
		anthropic    bool
	}{
		{http.MethodGet, "/v1/models", []string{"Authorization", "Bearer " + testKey}, false},
		{http.MethodGet, "/v1/messages", []string{"Anthropic-Version", "2023-06-01"}, true},
		{http.MethodHead, "/api/hello", nil, false},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, hs.URL+tt.path, nil)
		for i := 0; i+1 < len(tt.header); i += 2 {
			req.Header.Set(tt.header[i], tt.header[i+1])
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s = %d %s, want 404 JSON", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if tt.method == http.MethodHead {
			continue
		}
		body := decode(t, resp)
		if tt.anthropic != (body["type"] == "error") || (tt.anthropic && get(body, "error", "type") != "not_found_error") {
			t.Errorf("%s %s body = %v (want Anthropic shape: %v)", tt.method, tt.path, body, tt.anthropic)
		}
	}
	var got []string
	for _, r := range srv.Requests() {
		got = append(got, fmt.Sprintf("%s %s %d %s", r.Method, r.Path, r.Status, r.Family))
	}
	want := []string{"GET /v1/models 404 ", "GET /v1/messages 404 ", "HEAD /api/hello 404 "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
}

func TestServer_BadRequest(t *testing.T) {
	_, hs := newStub(t, routerstub.NewQueue(routerstub.Text("ok")))
	for _, body := range []string{`{not json`, `{"messages":[]}`} {
		if resp := post(t, hs, "/v1/messages", body); resp.StatusCode != 400 || get(decode(t, resp), "error", "type") != "invalid_request_error" {
			t.Errorf("POST %s: status %d, want 400 invalid_request_error", body, resp.StatusCode)
		}
	}
}

func TestReply_Error(t *testing.T) {
	tests := []struct {
		reply             routerstub.Reply
		status            int
		anthropic, openAI string // error type per family
		noRetry           bool
	}{
		{routerstub.Error(429, "slow down"), 429, "rate_limit_error", "requests", true},
		{routerstub.Error(529, "busy"), 529, "overloaded_error", "server_error", true},
		{routerstub.Error(500, "boom").Retryable(), 500, "api_error", "server_error", false},
		{routerstub.Error(400, "bad"), 400, "invalid_request_error", "invalid_request_error", true},
	}
	for _, p := range paths {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%d", p.family, tt.status), func(t *testing.T) {
				srv, hs := newStub(t, routerstub.NewQueue(tt.reply))
				resp := post(t, hs, p.path, p.body)
				if resp.StatusCode != tt.status {
					t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
				}
				if got := resp.Header.Get("X-Should-Retry") == "false"; got != tt.noRetry {
					t.Errorf("x-should-retry false = %v, want %v", got, tt.noRetry)
				}
				body := decode(t, resp)
				msg := get(body, "error", "message")
				typ := get(body, "error", "type")
				want := tt.openAI
				if p.family == routerstub.FamilyAnthropic {
					want = tt.anthropic
					if body["type"] != "error" {
						t.Errorf("body type = %v, want error", body["type"])
					}
				}
				if typ != want || msg == "" {
					t.Errorf("error = %v, want type %s", body, want)
				}
				if r := srv.Requests()[0]; r.Status != tt.status {
					t.Errorf("recorded status %d", r.Status)
				}
			})
		}
	}
}

// waitingHandler reports when each request's handler has returned.
func waitingHandler(h http.Handler) (http.Handler, <-chan struct{}) {
	done := make(chan struct{}, 16)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		h.ServeHTTP(w, r)
	}), done
}

func TestReply_Stall(t *testing.T) {
	for _, p := range paths {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", p.family, stream), func(t *testing.T) {
				// A minute, not forever: a stall that ignored the client
				// would still end and let this test fail cleanly.
				srv, err := routerstub.New(routerstub.Options{Keys: []string{testKey}, Script: routerstub.NewQueue(routerstub.Stall(time.Minute))})
				if err != nil {
					t.Fatal(err)
				}
				h, done := waitingHandler(srv)
				hs := httptest.NewServer(h)
				defer hs.Close()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				body := p.body
				if stream {
					body = strings.Replace(body, `{`, `{"stream":true,`, 1)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+p.path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+testKey)
				resp, err := hs.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("status = %d, want 200 before the stall", resp.StatusCode)
				}
				if stream {
					line, err := bufio.NewReader(resp.Body).ReadString('\n')
					if err != nil || !strings.HasPrefix(line, "event: ") && !strings.HasPrefix(line, "data: ") {
						t.Fatalf("first line %q (%v), want the opening event", line, err)
					}
				}
				select {
				case <-done:
					t.Fatal("handler returned during the stall")
				case <-time.After(100 * time.Millisecond):
				}
				cancel()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("handler still running 5s after the client went away")
				}
				if r := srv.Requests()[0]; r.Reply != "stall" || r.Status != 200 {
					t.Errorf("recorded reply %q status %d, want stall 200", r.Reply, r.Status)
				}
			})
		}
	}
}

func TestReply_StallEnds(t *testing.T) {
	_, hs := newStub(t, routerstub.NewQueue(routerstub.Stall(50*time.Millisecond)))
	start := time.Now()
	resp := post(t, hs, "/v1/messages", `{"model":"m","stream":true,"messages":[]}`)
	data, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("read a complete stream %q, want the connection cut", data)
	}
	if !strings.Contains(string(data), "message_start") || strings.Contains(string(data), "message_stop") {
		t.Errorf("stream = %q, want the opening event and no end", data)
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("stall lasted %s, want about 50ms", d)
	}
}

func TestReply_After(t *testing.T) {
	t.Run("answers after the delay", func(t *testing.T) {
		_, hs := newStub(t, routerstub.NewQueue(routerstub.Text("late").After(50*time.Millisecond)))
		start := time.Now()
		got := decode(t, post(t, hs, "/v1/responses", `{"model":"m","input":"x"}`))
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("answered after %s, want >= 50ms", d)
		}
		if get(got, "output", 0, "content", 0, "text") != "late" {
			t.Errorf("response = %v", got)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		srv, err := routerstub.New(routerstub.Options{Keys: []string{testKey}, Script: routerstub.NewQueue(routerstub.Text("x").After(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		h, done := waitingHandler(srv)
		hs := httptest.NewServer(h)
		defer hs.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(paths[2].body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		if _, err := hs.Client().Do(req); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("request error = %v, want deadline exceeded", err)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("handler still waiting after the client went away")
		}
		if r := srv.Requests()[0]; r.Status != routerstub.StatusClientGone {
			t.Errorf("recorded status %d, want %d", r.Status, routerstub.StatusClientGone)
		}
	})
}

func TestServer_Recording(t *testing.T) {
	srv, hs := newStub(t, routerstub.NewQueue(routerstub.Text("ok")))
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p := paths[i%len(paths)]
			resp := post(t, hs, p.path, strings.Replace(p.body, `"m"`, fmt.Sprintf(`"m%d"`, i), 1))
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	wg.Wait()
	reqs := srv.Requests()
	if len(reqs) != n {
		t.Fatalf("recorded %d requests, want %d", len(reqs), n)
	}
	models := map[string]bool{}
	for i, r := range reqs {
		if r.Seq != i+1 || r.Status != 200 || r.Key != testKey || r.Time.IsZero() {
			t.Errorf("request %d: seq %d status %d key ok %v", i, r.Seq, r.Status, r.Key == testKey)
		}
		models[r.Model] = true
	}
	if len(models) != n {
		t.Errorf("recorded %d distinct models, want %d", len(models), n)
	}
	// The copy is the caller's: changing it does not change the log.
	reqs[0].Model = "changed"
	if srv.Requests()[0].Model == "changed" {
		t.Error("Requests returned the log itself, want a copy")
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		opts    routerstub.Options
		wantErr bool
	}{
		{"key", routerstub.Options{Keys: []string{"k"}}, false},
		{"no auth", routerstub.Options{NoAuth: true}, false},
		{"nothing", routerstub.Options{}, true},
		{"empty key", routerstub.Options{Keys: []string{""}}, true},
		{"served model", routerstub.Options{Keys: []string{"k"}, ServedModel: "m"}, false},
		{"served model and a mapping", routerstub.Options{Keys: []string{"k"}, ServedModel: "m", ModelMapping: func(string) string { return "x" }}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := routerstub.New(tt.opts)
			if (err != nil) != tt.wantErr {
				t.Errorf("New() error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
	if _, err := routerstub.New(routerstub.Options{}); !errors.Is(err, routerstub.ErrNoKey) {
		t.Errorf("New() = %v, want ErrNoKey", err)
	}
}

func TestServer_WithoutAuth(t *testing.T) {
	srv, err := routerstub.New(routerstub.Options{NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	resp := post(t, hs, "/v1/chat/completions", paths[2].body, "X-None", "x")
	if resp.StatusCode != 200 {
		t.Errorf("status = %d, want 200", resp.StatusCode)
	}
	if r := srv.Requests()[0]; !r.Authorized || r.AuthKind != routerstub.AuthNone {
		t.Errorf("recorded %+v", r)
	}
}

func TestServer_Serve(t *testing.T) {
	srv, err := routerstub.New(routerstub.Options{Keys: []string{testKey}, Script: routerstub.NewQueue(routerstub.Stall(0))})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()

	// A stalled request in flight must not keep Serve from returning.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+l.Addr().String()+"/v1/responses",
		strings.NewReader(`{"model":"m","stream":true,"input":"x"}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve() = %v, want nil after cancel", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve still running 4s after its context ended")
	}
}

func TestServer_LogsWithoutKey(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, hs := newStubWith(t, routerstub.Options{Script: routerstub.NewQueue(routerstub.Text("ok")), Logger: logger})
	_, _ = io.Copy(io.Discard, post(t, hs, "/v1/responses", paths[1].body).Body)
	_, _ = io.Copy(io.Discard, post(t, hs, "/v1/responses", paths[1].body, "Authorization", "Bearer sk-wrong-secret").Body)
	hs.Close()
	logs := buf.String()
	if !strings.Contains(logs, "path=/v1/responses") || !strings.Contains(logs, "status=401") {
		t.Errorf("log lacks the requests:\n%s", logs)
	}
	if strings.Contains(logs, testKey) || strings.Contains(logs, "sk-wrong-secret") {
		t.Errorf("log contains a key:\n%s", logs)
	}
}
