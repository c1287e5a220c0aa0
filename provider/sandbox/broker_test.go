package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
)

// sh runs script in box as its user and returns its output.
func sh(t *testing.T, box vendors.Box, script string) string {
	t.Helper()
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// presentScript presents $TOKEN to the broker at $URL on $ROUTE and prints
// the status and the broker's refusal.
const presentScript = `node -e '
fetch(process.env.URL + process.env.ROUTE, {method: "POST", headers: {"x-api-key": process.env.TOKEN, "content-type": "application/json",
  "anthropic-version": "2023-06-01"}, body: JSON.stringify({model: "m", max_tokens: 8, messages: [{role: "user", content: "hi"}]})})
  .then(r => console.log(r.status, r.headers.get("x-boxctl-broker-refusal") || "-"), e => console.log("error", e.message))'`

// TestBroker_LiveAttacks: on Docker, a box's harness reaches the model
// only through the broker with a token of its own; the upstream key is in
// no process environment of the box nor in its container's config; the
// token is refused from another box, on another route and after the box
// is gone, each refusal counted.
func TestBroker_LiveAttacks(t *testing.T) {
	f := setup(t)
	var mu sync.Mutex
	var ended []sandbox.Event
	p := f.Provider(t, func(o *sandbox.Options) {
		o.OnEvent = func(ev sandbox.Event) {
			if ev.Type == sandbox.EventTurnEnded {
				mu.Lock()
				ended = append(ended, ev)
				mu.Unlock()
			}
		}
	})
	a := create(t, p, sandbox.CreateRequest{Profile: claude})
	b := create(t, p, sandbox.CreateRequest{Profile: claude})
	marker := "broker turn " + randText()
	text, _, err := sandboxtest.Turn(t.Context(), a, provider.Turn{Prompt: marker})
	if err != nil || text != replyText {
		t.Fatalf("turn through the broker = %q, %v", text, err)
	}
	var seen bool
	for _, r := range f.Stub.Requests() {
		if strings.Contains(r.Prompt, marker) {
			seen = true
			if r.Key != f.Router.Key || !r.Authorized {
				t.Errorf("the upstream got key %q, want the real key", r.Key)
			}
		}
	}
	if !seen {
		t.Fatal("the turn's model request never reached the upstream")
	}
	u, err := f.Broker.Usage(t.Context(), a.Box().ID())
	if err != nil || u.Requests == 0 || u.OutputTokens == 0 || u.Models[servedModel] == 0 {
		t.Errorf("broker usage of the box = %+v, %v; want its requests, tokens and served model", u, err)
	}
	mu.Lock()
	if len(ended) != 1 || ended[0].Usage == nil || ended[0].Usage.Requests != u.Requests || ended[0].Usage.OutputTokens != u.OutputTokens {
		t.Errorf("turn.ended events %+v, want one with the turn's usage %+v", ended, u)
	}
	mu.Unlock()

	// A dispatched turn's end is watched for: its turn.ended carries
	// what the broker measured during it, and the next turn in the box
	// waits for it and is counted apart.
	ref, err := b.Dispatch(t.Context(), provider.Turn{Prompt: "dispatched " + randText()})
	if err != nil {
		t.Fatal(err)
	}
	polltest.UntilNil(t, 60*time.Second, "the next turn, once the dispatched one ended", func() error {
		_, _, err := sandboxtest.Turn(t.Context(), b, provider.Turn{Prompt: "after the dispatched one"})
		if _, busy := errors.AsType[*provider.ConflictError](err); err != nil && !busy {
			t.Fatal(err)
		}
		return err
	})
	polltest.Until(t, 30*time.Second, "the dispatched and the streamed turns' ends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ended) == 3
	})
	ub, err := f.Broker.Usage(t.Context(), b.Box().ID())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	d, next := ended[1], ended[2]
	if d.RunID != ref.ControlRef.RunID || d.Reason != provider.StatusCompleted || d.Usage == nil || d.Usage.Requests == 0 ||
		next.Usage == nil || d.Usage.Requests+next.Usage.Requests != ub.Requests || d.Usage.OutputTokens+next.Usage.OutputTokens != ub.OutputTokens {
		t.Errorf("turn.ended of the dispatched run %+v and of the next %+v; want them to split the box's usage %+v", d, next, ub)
	}
	mu.Unlock()

	// What the box's processes and files hold, as its user reads them
	// (the bridge keeps its own environment from them), and the
	// container's config: never the upstream key.
	inBox := sh(t, a.Box(), `cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n'; K=router; grep -rIl --exclude-dir=proc --exclude-dir=sys -F "$K-key-" / 2>/dev/null | head -n 5`)
	if strings.Contains(inBox, f.Router.Key) || strings.Contains(inBox, "router-key-") || strings.Contains(f.Docker().Inspect(t, a.Box().ID()), f.Router.Key) {
		t.Errorf("the upstream key is in the box: %s", inBox)
	}
	// The token a box's harness holds: granted again, as an attacker
	// who read it would hold it (the box's earlier one is refused as
	// rotated from now on).
	token, err := f.Broker.Grant(t.Context(), broker.Grant{Box: a.Box().ID()})
	if err != nil {
		t.Fatal(err)
	}
	present := func(from *sandbox.Environment, tok, route string) string {
		return sh(t, from.Box(), "URL="+f.Broker.URL+" ROUTE="+route+" TOKEN="+tok+" "+presentScript)
	}
	before := f.Broker.Refusals()
	if got := present(a, token, "/v1/messages"); got != "200 -" {
		t.Errorf("the token from its own box: %s, want 200", got)
	}
	if got := present(b, token, "/v1/messages"); got != "403 "+string(broker.RefusedSource) {
		t.Errorf("the token from another box: %s, want 403 %s", got, broker.RefusedSource)
	}
	if got := present(a, token, "/v1/files"); got != "403 "+string(broker.RefusedRoute) {
		t.Errorf("the token on another route: %s, want 403 %s", got, broker.RefusedRoute)
	}
	if err := a.Destroy(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if got := present(b, token, "/v1/messages"); got != "401 "+string(broker.RefusedRevoked) {
		t.Errorf("the token after its box was destroyed: %s, want 401 %s", got, broker.RefusedRevoked)
	}
	after := f.Broker.Refusals()
	for _, why := range []broker.Refusal{broker.RefusedSource, broker.RefusedRoute, broker.RefusedRevoked} {
		if after[why] <= before[why] {
			t.Errorf("refusal %s not counted", why)
		}
	}
}

// TestBroker_LiveProviders: a real turn of each harness in a Docker box
// through the broker whose upstream is a provider's own API (the local
// model endpoint standing in for it): the upstream gets the provider's
// key in the provider's own header, and the turn answers. Pi and opencode
// speak Anthropic Messages for an anthropic model.
func TestBroker_LiveProviders(t *testing.T) {
	f := setup(t)
	img := boxtest.Image(t, boxtest.Options{Harnesses: []string{"claude-code", "codex", "opencode", "gemini", "pi"}})
	tests := []struct {
		harness  string
		model    provider.ProfileModel
		upstream string
		auth     routerstub.AuthKind
	}{
		{"claude-code", provider.ProfileModel{Default: "claude-sonnet-4-5"}, broker.Anthropic, routerstub.AuthAPIKey},
		{"codex", provider.ProfileModel{Default: "gpt-5"}, broker.OpenAI, routerstub.AuthBearer},
		{"gemini", provider.ProfileModel{Default: "gemini-2.5-pro"}, broker.Gemini, routerstub.AuthGoogAPIKey},
		{"pi", provider.ProfileModel{Default: "claude-sonnet-4-5", Provider: "anthropic"}, broker.Anthropic, routerstub.AuthAPIKey},
		{"opencode", provider.ProfileModel{Default: "claude-sonnet-4-5", Provider: "anthropic"}, broker.Anthropic, routerstub.AuthAPIKey},
	}
	for _, tt := range tests {
		t.Run(tt.harness+"/"+tt.upstream, func(t *testing.T) {
			up, err := broker.ForProvider(tt.upstream, f.Router.URL, f.Router.Key)
			if err != nil {
				t.Fatal(err)
			}
			up.Name = tt.upstream + "-" + tt.harness
			if err := f.Broker.SetUpstream(up); err != nil {
				t.Fatal(err)
			}
			p := f.On(t, sandboxtest.Target{Name: "docker", Vendor: f.Vendor, Image: img}, func(o *sandbox.Options) {
				o.Router, o.Broker, o.BrokerURL, o.Upstream = sandbox.Router{}, f.Broker, f.Broker.URL, up.Name
			})
			env := create(t, p, sandbox.CreateRequest{Profile: provider.Profile{Harness: tt.harness, Model: tt.model}})
			marker := "provider turn " + randText()
			text, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: marker})
			if err != nil || text != replyText {
				t.Fatalf("turn = %q, %v", text, err)
			}
			var kinds []routerstub.AuthKind
			for _, r := range f.Stub.Requests() {
				if strings.Contains(r.Prompt, marker) {
					kinds = append(kinds, r.AuthKind)
					if r.AuthKind != tt.auth || r.Key != f.Router.Key {
						t.Errorf("the upstream got the key as %q, want %q", r.AuthKind, tt.auth)
					}
				}
			}
			if len(kinds) == 0 {
				t.Error("no model request of the turn reached the upstream")
			}
		})
	}
}

// TestDispatch_EndHandlerCallsBack: the handler of a dispatched turn's
// end may call back into its environment (a turn, then Destroy) without
// hanging: the event is emitted after the watch settled it, once.
func TestDispatch_EndHandlerCallsBack(t *testing.T) {
	f := setup(t)
	var (
		mu    sync.Mutex
		env   *sandbox.Environment
		ends  int
		calls = make(chan error, 2)
	)
	p := f.Provider(t, func(o *sandbox.Options) {
		o.OnEvent = func(ev sandbox.Event) {
			if ev.Type != sandbox.EventTurnEnded {
				return
			}
			mu.Lock()
			ends++
			first, e := ends == 1, env
			mu.Unlock()
			if first {
				_, _, err := sandboxtest.Turn(context.Background(), e, provider.Turn{Prompt: "from the handler"})
				calls <- err
				calls <- e.Destroy(context.Background())
			}
		}
	})
	e := create(t, p, sandbox.CreateRequest{Profile: claude})
	mu.Lock()
	env = e
	mu.Unlock()
	if _, err := e.Dispatch(t.Context(), provider.Turn{Prompt: "dispatched, then called back"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-calls:
			if err != nil {
				t.Errorf("a call from the handler: %v", err)
			}
		case <-time.After(90 * time.Second):
			t.Fatal("the handler's calls into the environment did not return")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ends != 2 {
		t.Errorf("%d turn.ended events, want the dispatched turn's and the handler's", ends)
	}
}
