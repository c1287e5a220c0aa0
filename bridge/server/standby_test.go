package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/wire"
)

const (
	poolToken   = "pool-token-0123456789"
	claimBearer = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	claimKey    = "router-key-secret-value"
	claimSecret = "env-secret-value"
)

var standbyNow = time.Unix(1_800_000_000, 0)

func claimBody(edit func(*wire.Claim)) string {
	c := wire.Claim{Bearer: claimBearer, RouterURL: "http://router.test:8080", RouterKey: claimKey,
		Env: map[string]string{"API_TOKEN": claimSecret}, Labels: map[string]string{"team": "a"},
		Deadline: standbyNow.Add(time.Hour).Unix()}
	if edit != nil {
		edit(&c)
	}
	b, _ := json.Marshal(c)
	return string(b)
}

type standbyEnv struct {
	url    string
	mu     sync.Mutex
	claims []wire.Claim
	fail   error
}

func newStandbyEnv(t *testing.T) *standbyEnv {
	t.Helper()
	v := &standbyEnv{}
	sb, err := NewStandby(StandbyOptions{Token: poolToken, Now: func() time.Time { return standbyNow },
		Backends: []*engine.Backend{{Adapter: claude.Adapter{}, Bin: bridgetest.FakeClaude(t)}},
		Claim: func(_ context.Context, c wire.Claim) error {
			v.mu.Lock()
			defer v.mu.Unlock()
			v.claims = append(v.claims, c)
			return v.fail
		}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(checked(t, sb))
	t.Cleanup(ts.Close)
	v.url = ts.URL
	return v
}

func (v *standbyEnv) do(t *testing.T, method, path, token, body string) (int, wire.ErrorBody, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, v.url+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e wire.ErrorResponse
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Error, raw
}

func TestStandby_Routes(t *testing.T) {
	tests := []struct {
		name, method, path, token, body string
		status                          int
		typ                             string
	}{
		{"models refused", "GET", "/v1/models", "", "", 503, wire.TypeStandby},
		{"chat refused with the token", "POST", "/v1/chat/completions", poolToken, `{}`, 503, wire.TypeStandby},
		{"sessions refused", "POST", "/v1/sessions", claimBearer, `{}`, 503, wire.TypeStandby},
		{"root refused", "GET", "/", "", "", 503, wire.TypeStandby},
		{"claim without token", "POST", wire.PathClaim, "", claimBody(nil), 401, wire.TypeInvalidAuthentication},
		{"claim with a wrong token", "POST", wire.PathClaim, "nope", claimBody(nil), 401, wire.TypeInvalidAuthentication},
		{"claim GET", "GET", wire.PathClaim, poolToken, "", 405, wire.TypeMethodNotAllowed},
		{"claim not JSON", "POST", wire.PathClaim, poolToken, `{"bearer":` + claimKey, 400, wire.TypeInvalidRequest},
		{"claim unknown field", "POST", wire.PathClaim, poolToken, `{"bearer":"x","extra":1}`, 400, wire.TypeInvalidRequest},
		{"short bearer", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.Bearer = "abc" }), 400, wire.TypeInvalidRequest},
		{"upper-case bearer", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.Bearer = strings.ToUpper(claimBearer) }), 400, wire.TypeInvalidRequest},
		{"router with credentials", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.RouterURL = "http://u:" + claimKey + "@r.test" }), 400, wire.TypeInvalidRequest},
		{"relative router", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.RouterURL = "/v1" }), 400, wire.TypeInvalidRequest},
		{"no router key", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.RouterKey = "" }), 400, wire.TypeInvalidRequest},
		{"bridge env", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.Env["BRIDGE_BEARER"] = "x" }), 400, wire.TypeInvalidRequest},
		{"bad env name", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.Env["1X"] = "x" }), 400, wire.TypeInvalidRequest},
		{"past deadline", "POST", wire.PathClaim, poolToken, claimBody(func(c *wire.Claim) { c.Deadline = standbyNow.Unix() }), 400, wire.TypeInvalidRequest},
	}
	v := newStandbyEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, e, raw := v.do(t, tt.method, tt.path, tt.token, tt.body)
			if status != tt.status || e.Type != tt.typ {
				t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, status, e.Type, tt.status, tt.typ)
			}
			for _, secret := range []string{claimKey, claimSecret, claimBearer, poolToken} {
				if strings.Contains(string(raw), secret) {
					t.Errorf("the answer quotes a secret: %s", raw)
				}
			}
		})
	}
	if len(v.claims) != 0 {
		t.Errorf("%d claims applied by refused requests", len(v.claims))
	}
}

func TestStandby_HealthSaysStandby(t *testing.T) {
	v := newStandbyEnv(t)
	status, _, raw := v.do(t, "GET", "/health", "", "")
	var h wire.Health
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	if status != 200 || h.Status != wire.HealthStandby || !h.Standby || len(h.Backends) != 1 || h.Backends[0].State != wire.BackendReady {
		t.Errorf("GET /health = %d %s", status, raw)
	}
}

// TestStandby_ClaimOnce: the first valid claim is applied and spends the
// token; of concurrent claims exactly one wins, the rest answer 409.
func TestStandby_ClaimOnce(t *testing.T) {
	v := newStandbyEnv(t)
	const n = 8
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status, e, _ := v.do(t, "POST", wire.PathClaim, poolToken, claimBody(nil))
			if status != 200 && e.Type != wire.TypeAlreadyClaimed {
				t.Errorf("claim = %d %s", status, e.Type)
			}
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	won := 0
	for s := range statuses {
		if s == 200 {
			won++
		}
	}
	if won != 1 || len(v.claims) != 1 {
		t.Fatalf("%d claims answered 200 and %d applied, want 1", won, len(v.claims))
	}
	c := v.claims[0]
	if c.Bearer != claimBearer || c.RouterKey != claimKey || c.Env["API_TOKEN"] != claimSecret || c.Labels["team"] != "a" {
		t.Errorf("applied claim differs from the one sent")
	}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%#v", c), fmt.Sprintf("%+v", c), c.LogValue().String()} {
		if strings.Contains(s, claimKey) || strings.Contains(s, claimBearer) || strings.Contains(s, claimSecret) {
			t.Errorf("a claim prints a secret: %s", s)
		}
	}
}

func TestStandby_FailedClaimSpendsTheToken(t *testing.T) {
	v := newStandbyEnv(t)
	v.fail = errors.New("store broke")
	if status, e, _ := v.do(t, "POST", wire.PathClaim, poolToken, claimBody(nil)); status != 500 || e.Type != wire.TypeServerError {
		t.Errorf("failed claim = %d %s, want 500 %s", status, e.Type, wire.TypeServerError)
	}
	if status, e, _ := v.do(t, "POST", wire.PathClaim, poolToken, claimBody(nil)); status != 409 || e.Type != wire.TypeAlreadyClaimed {
		t.Errorf("claim after a failed one = %d %s, want 409", status, e.Type)
	}
}

// TestServer_ClaimRefused: a bridge that serves answers a claim 409,
// whatever its bearer.
func TestServer_ClaimRefused(t *testing.T) {
	v := newEnv(t, config{})
	for _, token := range []string{bearer, poolToken} {
		resp := v.do(t, "POST", wire.PathClaim, claimBody(nil), "Authorization", "Bearer "+token)
		var e wire.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 409 || e.Error.Type != wire.TypeAlreadyClaimed {
			t.Errorf("claim of a serving bridge = %d %s, want 409 %s", resp.StatusCode, e.Error.Type, wire.TypeAlreadyClaimed)
		}
	}
}
