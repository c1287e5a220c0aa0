package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

const (
	upstreamKey = "sk-upstream-real-key-0123456789"
	served      = "stub-served-model"
)

// rig is a broker in front of a local model endpoint that accepts only
// the upstream key.
type rig struct {
	stub *routerstub.Server
	b    *broker.Broker
	srv  *httptest.Server
	logs *bytes.Buffer
}

func newRig(t *testing.T, ups ...func(url string) broker.Upstream) *rig {
	t.Helper()
	stub, err := routerstub.New(routerstub.Options{Keys: []string{upstreamKey}, ServedModel: served,
		Script: routerstub.ScriptFunc(func(routerstub.Request) routerstub.Reply { return routerstub.Deltas("hello from upstream", 4) })})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(stub)
	t.Cleanup(up.Close)
	if len(ups) == 0 {
		ups = append(ups, func(u string) broker.Upstream {
			return broker.Upstream{Name: broker.Router, URL: u, Key: upstreamKey, Auth: broker.AuthAsPresented}
		})
	}
	var list []broker.Upstream
	for _, f := range ups {
		list = append(list, f(up.URL))
	}
	logs := &bytes.Buffer{}
	b, err := broker.New(broker.Options{Upstreams: list, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return &rig{stub: stub, b: b, srv: srv, logs: logs}
}

// call is one model request as a harness makes it.
type call struct {
	name, path, header string
	body               string
}

var calls = []call{
	{"anthropic x-api-key", "/v1/messages", "X-Api-Key", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"anthropic bearer", "/v1/messages", "Authorization", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{"chat", "/v1/chat/completions", "Authorization", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
	{"responses", "/v1/responses", "Authorization", `{"model":"m","stream":true,"input":"hi"}`},
	{"gemini header", "/v1beta/models/m:streamGenerateContent?alt=sse", "X-Goog-Api-Key", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	{"gemini query", "/v1beta/models/m:streamGenerateContent?alt=sse", "key", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
	{"anthropic whole", "/v1/messages", "X-Api-Key", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
}

func (r *rig) do(t *testing.T, c call, token string) *http.Response {
	t.Helper()
	u := r.srv.URL + c.path
	if c.header == "key" {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "key=" + token
	}
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	switch c.header {
	case "Authorization":
		req.Header.Set("Authorization", "Bearer "+token)
	case "key":
	default:
		req.Header.Set(c.header, token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func grant(t *testing.T, b broker.Granter, g broker.Grant) string {
	t.Helper()
	tok, err := b.Grant(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestBroker_SwapsTheToken: every API family, streamed or not, reaches
// the upstream with the real key in the header the harness used, the
// answer streams back unchanged, and the broker meters what the upstream
// said it spent.
func TestBroker_SwapsTheToken(t *testing.T) {
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			tok := grant(t, r.b, broker.Grant{Box: "box-1"})
			resp := r.do(t, c, tok)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "tream") {
				t.Fatalf("status %d, body %s", resp.StatusCode, body)
			}
			reqs := r.stub.Requests()
			if len(reqs) != 1 || reqs[0].Key != upstreamKey || !reqs[0].Authorized {
				t.Fatalf("upstream saw %+v, want one request with the real key", reqs)
			}
			if strings.Contains(reqs[0].Query, tok) {
				t.Error("the box token reached the upstream")
			}
			u, err := r.b.Usage(t.Context(), "box-1")
			if err != nil {
				t.Fatal(err)
			}
			want := reqs[0].Usage
			if u.Requests != 1 || u.InputTokens != int64(want.InputTokens) || u.OutputTokens != int64(want.OutputTokens) || u.Models[served] != 1 {
				t.Errorf("usage %+v, want 1 request, %d in, %d out, served by %s", u, want.InputTokens, want.OutputTokens, served)
			}
			if strings.Contains(r.logs.String(), upstreamKey) || strings.Contains(r.logs.String(), tok) {
				t.Error("a secret is in the broker's log")
			}
		})
	}
}

// TestBroker_ProviderAuth: a provider's upstream gets the key in its own
// header, whatever header the harness used.
func TestBroker_ProviderAuth(t *testing.T) {
	tests := []struct {
		upstream string
		c        call
		want     routerstub.AuthKind
	}{
		{broker.Anthropic, calls[1], routerstub.AuthAPIKey},
		{broker.OpenAI, calls[3], routerstub.AuthBearer},
		{broker.Gemini, calls[5], routerstub.AuthGoogAPIKey},
	}
	for _, tt := range tests {
		t.Run(tt.upstream, func(t *testing.T) {
			r := newRig(t, func(u string) broker.Upstream {
				up, err := broker.ForProvider(tt.upstream, u, upstreamKey)
				if err != nil {
					t.Fatal(err)
				}
				return up
			})
			resp := r.do(t, tt.c, grant(t, r.b, broker.Grant{Box: "b"}))
			_, _ = io.Copy(io.Discard, resp.Body)
			reqs := r.stub.Requests()
			if resp.StatusCode != http.StatusOK || len(reqs) != 1 || reqs[0].AuthKind != tt.want || reqs[0].Key != upstreamKey {
				t.Errorf("status %d, upstream saw %+v; want the key as %s", resp.StatusCode, reqs, tt.want)
			}
		})
	}
}

// TestBroker_Refuses: a token is worth nothing but to its box, on the
// model APIs, while it lives and within its budget; each refusal is
// typed in the family's own error shape and counted.
func TestBroker_Refuses(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	live := grant(t, r.b, broker.Grant{Box: "live"})
	gone := grant(t, r.b, broker.Grant{Box: "gone"})
	_ = r.b.Revoke(ctx, "gone")
	old := grant(t, r.b, broker.Grant{Box: "rotated"})
	grant(t, r.b, broker.Grant{Box: "rotated"})
	elsewhere := grant(t, r.b, broker.Grant{Box: "elsewhere"})
	if err := r.b.Bind(ctx, "elsewhere", netip.MustParseAddr("127.0.0.2")); err != nil {
		t.Fatal(err)
	}
	boundAtGrant := grant(t, r.b, broker.Grant{Box: "bound", Source: netip.MustParseAddr("127.0.0.3")})
	spent := grant(t, r.b, broker.Grant{Box: "spent", Budget: broker.Budget{Requests: 1}})
	if resp := r.do(t, calls[0], spent); resp.StatusCode != http.StatusOK {
		t.Fatalf("the budget's first request: %d", resp.StatusCode)
	}
	tests := []struct {
		name    string
		c       call
		token   string
		status  int
		why     broker.Refusal
		errType string // the family's error type or status
	}{
		{"no token", calls[0], "", 401, broker.RefusedNoToken, "authentication_error"},
		{"unknown token", calls[2], "bxt_made_up", 401, broker.RefusedUnknown, "invalid_request_error"},
		{"after destroy", calls[0], gone, 401, broker.RefusedRevoked, "authentication_error"},
		{"after rotation", calls[4], old, 401, broker.RefusedRotated, "UNAUTHENTICATED"},
		{"from another box", calls[0], elsewhere, 403, broker.RefusedSource, "permission_error"},
		{"from another box, bound at its grant", calls[0], boundAtGrant, 403, broker.RefusedSource, "permission_error"},
		{"another route", call{"models", "/v1/models", "Authorization", `{}`}, live, 403, broker.RefusedRoute, "invalid_request_error"},
		{"admin route", call{"admin", "/v1/grants", "X-Api-Key", `{"box":"x"}`}, live, 403, broker.RefusedRoute, "permission_error"},
		{"budget spent", calls[0], spent, 429, broker.RefusedBudget, "rate_limit_error"},
		{"budget spent, openai", calls[2], spent, 429, broker.RefusedBudget, "requests"},
		{"budget spent, gemini", calls[4], spent, 429, broker.RefusedBudget, "RESOURCE_EXHAUSTED"},
	}
	before := len(r.stub.Requests())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.do(t, tt.c, tt.token)
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type   string `json:"type"`
					Status string `json:"status"`
				} `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			got := body.Error.Type + body.Error.Status
			if resp.StatusCode != tt.status || resp.Header.Get(broker.RefusalHeader) != string(tt.why) || got != tt.errType {
				t.Errorf("%d %q %q, want %d %q %q", resp.StatusCode, resp.Header.Get(broker.RefusalHeader), got, tt.status, tt.why, tt.errType)
			}
		})
	}
	if n := len(r.stub.Requests()); n != before {
		t.Errorf("%d refused requests reached the upstream", n-before)
	}
	counts := r.b.Refusals()
	for why, n := range map[broker.Refusal]int64{broker.RefusedNoToken: 1, broker.RefusedUnknown: 1, broker.RefusedRevoked: 1,
		broker.RefusedRotated: 1, broker.RefusedSource: 2, broker.RefusedRoute: 2, broker.RefusedBudget: 3} {
		if counts[why] != n {
			t.Errorf("refusals[%s] = %d, want %d (all: %v)", why, counts[why], n, counts)
		}
	}
	if u, _ := r.b.Usage(ctx, "spent"); u.Requests != 1 || u.Refused != 3 {
		t.Errorf("usage of the spent box %+v, want 1 request and 3 refused", u)
	}
	rec := httptest.NewRecorder()
	r.b.Metrics().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`boxctl_broker_requests_total{box="spent"} 1`, `boxctl_broker_refused_total{reason="budget_spent"} 3`,
		`boxctl_broker_refused_total{reason="wrong_source"} 2`, "boxctl_broker_live_tokens 5"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, rec.Body.String())
		}
	}
}

// TestBroker_TokenBudget: a token budget ends the box's requests once the
// upstream said it was spent.
func TestBroker_TokenBudget(t *testing.T) {
	r := newRig(t)
	tok := grant(t, r.b, broker.Grant{Box: "b", Budget: broker.Budget{Tokens: 1}})
	for i, want := range []int{200, 429} {
		resp := r.do(t, calls[0], tok)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
}

// TestUpstream_Redacted: an upstream's key is in none of its printed or
// JSON forms.
func TestUpstream_Redacted(t *testing.T) {
	u, err := broker.ForProvider(broker.Anthropic, "", upstreamKey)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "up", u)
	j, _ := json.Marshal(u)
	printed := []string{u.String(), u.GoString(), logs.String(), string(j)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		printed = append(printed, fmt.Sprintf(verb, u))
	}
	for _, s := range printed {
		if strings.Contains(s, upstreamKey) {
			t.Errorf("the key shows: %s", s)
		}
	}
	for _, bad := range []broker.Upstream{{Name: "x", URL: "ftp://h", Key: "k", Auth: broker.AuthBearer},
		{Name: "x", URL: "http://u:p@h", Key: "k", Auth: broker.AuthBearer}, {Name: "x", URL: "http://h", Auth: broker.AuthBearer}} {
		if _, err := broker.New(broker.Options{Upstreams: []broker.Upstream{bad}}); err == nil || strings.Contains(err.Error(), "p@h") {
			t.Errorf("New(%v) = %v, want a refusal that quotes no credential", bad, err)
		}
	}
}

// TestBroker_BodyBound: a request body over the bound is answered 413 in
// the family's shape and never forwarded.
func TestBroker_BodyBound(t *testing.T) {
	stub, err := routerstub.New(routerstub.Options{Keys: []string{upstreamKey}})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(stub)
	t.Cleanup(up.Close)
	b, err := broker.New(broker.Options{MaxRequestBytes: 1024,
		Upstreams: []broker.Upstream{{Name: broker.Router, URL: up.URL, Key: upstreamKey, Auth: broker.AuthAsPresented}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	r := &rig{stub: stub, b: b, srv: srv}
	tok := grant(t, b, broker.Grant{Box: "b"})
	big := calls[0]
	big.body = `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2048) + `"}]}`
	resp := r.do(t, big, tok)
	var body struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || body.Error.Type != "request_too_large" || len(stub.Requests()) != 0 {
		t.Errorf("an oversized request: %d %q, %d forwarded", resp.StatusCode, body.Error.Type, len(stub.Requests()))
	}
}
