package sandbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/webhook"
)

// TestWebhooks_Live: on Docker, every lifecycle event of a box, from its
// create to its destroy, reaches the webhook endpoint of
// Options.Webhooks, signed, once each, with its reason and the turn's
// usage.
func TestWebhooks_Live(t *testing.T) {
	f := setup(t)
	secret := webhook.NewSecret()
	var (
		mu  sync.Mutex
		got []sandbox.Event
		ids = map[string]bool{}
		bad []error
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
			bad = append(bad, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var m webhook.Message
		var ev sandbox.Event
		if err := json.Unmarshal(body, &m); err != nil {
			bad = append(bad, err)
		} else if err := json.Unmarshal(m.Data, &ev); err != nil {
			bad = append(bad, err)
		}
		if !ids[m.ID] {
			ids[m.ID] = true
			got = append(got, ev)
		}
	}))
	t.Cleanup(srv.Close)
	hooks, err := webhook.Open(t.Context(), webhook.Options{Path: filepath.Join(t.TempDir(), "webhooks.db"),
		Endpoints: []webhook.Endpoint{{URL: srv.URL, Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	p := f.Provider(t, func(o *sandbox.Options) { o.Webhooks = hooks })
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	if _, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."}); err != nil {
		t.Fatal(err)
	}
	if err := env.Destroy(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := hooks.Close(ctx); err != nil {
		t.Fatalf("webhooks Close() = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var types []sandbox.EventType
	for _, ev := range got {
		types = append(types, ev.Type)
		if ev.BoxID != env.Box().ID() || ev.Vendor == "" || ev.RunTag != p.RunTag() {
			t.Errorf("event %+v: want box %s's, with its vendor and run tag", ev, env.Box().ID())
		}
		switch ev.Type {
		case sandbox.EventTurnEnded:
			if ev.Reason == "" || ev.Usage == nil || ev.Usage.Requests == 0 {
				t.Errorf("turn.ended %+v: want its outcome and usage", ev)
			}
		case sandbox.EventDestroyed:
			if ev.Reason != sandbox.ReasonUser {
				t.Errorf("destroyed for %q, want %q", ev.Reason, sandbox.ReasonUser)
			}
		}
	}
	slices.Sort(types)
	want := []sandbox.EventType{sandbox.EventCreated, sandbox.EventDestroyed, sandbox.EventReady, sandbox.EventTurnEnded, sandbox.EventTurnStarted}
	if !slices.Equal(types, want) {
		t.Errorf("delivered %v, want %v", types, want)
	}
	if len(bad) > 0 {
		t.Errorf("bad deliveries: %v", bad)
	}
}
