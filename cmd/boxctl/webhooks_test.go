package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/webhook"
)

func TestUpCmd_Webhooks(t *testing.T) {
	secret := webhook.NewSecret()
	tests := []struct {
		name    string
		secret  string
		args    []string
		want    []string
		wantErr string // with exit code 2
	}{
		{name: "none", want: nil},
		{name: "two", secret: secret, args: []string{"--webhook", "https://hooks.example/a", "--webhook", "http://127.0.0.1:9/b"},
			want: []string{"https://hooks.example/a", "http://127.0.0.1:9/b"}},
		{name: "no secret", args: []string{"--webhook", "https://hooks.example/a"}, wantErr: webhookSecretEnv},
		{name: "bad secret", secret: "hunter2", args: []string{"--webhook", "https://hooks.example/a"}, wantErr: "whsec_"},
		{name: "relative URL", secret: secret, args: []string{"--webhook", "/hooks"}, wantErr: "absolute http"},
		{name: "credentials in the URL", secret: secret, args: []string{"--webhook", "https://u:p4ss@hooks.example/T0KEN"}, wantErr: "without credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			useState(t)
			t.Setenv(webhookSecretEnv, tt.secret)
			got, called, err := parseCmd(t, newUpCmd, append([]string{"up", "--router", "local"}, tt.args...)...)
			if tt.wantErr != "" {
				if called || err == nil || !strings.Contains(err.Error(), tt.wantErr) || exitCode(err) != 2 {
					t.Fatalf("up %v = %v (exit %d, ran %v), want %q with exit 2", tt.args, err, exitCode(err), called, tt.wantErr)
				}
				for _, s := range []string{"hunter2", "p4ss", "T0KEN"} {
					if strings.Contains(err.Error(), s) {
						t.Errorf("up %v = %v: quotes a secret", tt.args, err)
					}
				}
				return
			}
			if err != nil || !called {
				t.Fatalf("up %v = %v (ran %v)", tt.args, err, called)
			}
			if diff := cmp.Diff(tt.want, got.webhooks); diff != "" {
				t.Errorf("up %v webhooks (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

// hookSink takes signed deliveries.
type hookSink struct {
	secret string
	mu     sync.Mutex
	got    []webhook.Message
	bad    []error
}

func (k *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := webhook.Verify(k.secret, r.Header, body, 0); err != nil {
		k.bad = append(k.bad, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var m webhook.Message
	if err := json.Unmarshal(body, &m); err != nil {
		k.bad = append(k.bad, err)
	}
	k.got = append(k.got, m)
}

func (k *hookSink) messages() []webhook.Message {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]webhook.Message(nil), k.got...)
}

func eventOf(t *testing.T, m webhook.Message) sandbox.Event {
	t.Helper()
	var ev sandbox.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		t.Fatalf("data of %s: %v", m.ID, err)
	}
	return ev
}

func webhookStates(t *testing.T) []webhook.EndpointState {
	t.Helper()
	out, _, err := run(t, "webhooks", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var st []webhook.EndpointState
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("webhooks -o json = %q: %v", out, err)
	}
	return st
}

// TestWebhooks_Deliver: a box's events wait in the outbox beside the
// state, `boxctl webhooks` shows them by endpoint (never its path), drain
// delivers them signed, and a command that records events delivers what
// is pending before it exits.
func TestWebhooks_Deliver(t *testing.T) {
	useState(t)
	t.Setenv(webhookSecretEnv, "")
	k := &hookSink{secret: webhook.NewSecret()}
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	hook := srv.URL + "/hooks/T0KEN"
	s, err := boxstate.Open(boxstate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), func(st *boxstate.State) error {
		st.Boxes = append(st.Boxes, boxstate.Record{ID: "b1", Target: "docker", RunTag: "r1", Webhooks: []string{hook}},
			boxstate.Record{ID: "b2", Target: "docker", RunTag: "r2"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Record(sandbox.Event{Type: sandbox.EventCreated, Vendor: "docker", BoxID: "b1", RunTag: "r1"})
	s.Record(sandbox.Event{Type: sandbox.EventCreated, Vendor: "docker", BoxID: "b2", RunTag: "r2"}) // no webhook

	out, _, err := run(t, "webhooks")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, strings.TrimPrefix(srv.URL, "http://")) || strings.Contains(out, "T0KEN") {
		t.Errorf("webhooks = %q, want the endpoint's host and not its path", out)
	}
	if st := webhookStates(t); len(st) != 1 || st[0].Pending != 1 {
		t.Fatalf("webhooks -o json = %+v, want 1 pending", st)
	}
	if _, _, err := run(t, "webhooks", "drain"); err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), webhookSecretEnv) {
		t.Fatalf("webhooks drain without the secret = %v, want a usage error naming $%s", err, webhookSecretEnv)
	}

	t.Setenv(webhookSecretEnv, k.secret)
	if _, errOut, err := run(t, "webhooks", "drain", "--wait", "30s"); err != nil {
		t.Fatalf("webhooks drain = %v (%s)", err, errOut)
	}
	got := k.messages()
	if len(got) != 1 || len(k.bad) > 0 {
		t.Fatalf("delivered %+v (bad %v), want b1's created event", got, k.bad)
	}
	if ev := eventOf(t, got[0]); got[0].Type != string(sandbox.EventCreated) || ev.BoxID != "b1" || ev.RunTag != "r1" || ev.Type != sandbox.EventCreated {
		t.Errorf("delivered %s %+v, want b1's created event", got[0].Type, ev)
	}
	if st := webhookStates(t); len(st) != 1 || st[0].Pending != 0 || st[0].Delivered != 1 {
		t.Errorf("webhooks -o json after drain = %+v, want 1 delivered", st)
	}

	// A command that records events delivers before it exits.
	s.Record(sandbox.Event{Type: sandbox.EventDestroyed, Vendor: "docker", BoxID: "b1", RunTag: "r1", Reason: sandbox.ReasonUser})
	var stdout, stderr bytes.Buffer
	a := newApp(&stdout, &stderr)
	rm, _, err := newRootCmd(a).Find([]string{"rm"})
	if err != nil {
		t.Fatal(err)
	}
	rm.SetContext(context.Background())
	a.deliverQueuedWebhooks(rm)
	if got := k.messages(); len(got) != 2 || eventOf(t, got[1]).Reason != sandbox.ReasonUser {
		t.Errorf("delivered after rm: %+v, want the destroyed event too", got)
	}
	if strings.Contains(stderr.String(), "T0KEN") || strings.Contains(stderr.String(), k.secret) {
		t.Errorf("stderr = %q: quotes a secret", stderr.String())
	}
}
