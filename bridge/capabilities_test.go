package bridge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/internal/schemacheck"
	"github.com/tangle-network/boxctl/bridge/server"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// probeModels are models each harness accepts in a turn.
var probeModels = map[string]string{"pi": "openai/gpt-5", "opencode": "openai/gpt-5"}

// resumes reports whether an adapter's command for a turn that continues
// native session id carries that id (in its arguments, stdin, environment
// or generated files), which is what continuing a session takes.
func resumes(t *testing.T, a harness.Adapter, id string) bool {
	t.Helper()
	model, ok := probeModels[a.Name()]
	if !ok {
		model = "default"
	}
	turn := harness.Turn{RunID: "run-probe", Bin: "/bin/" + a.DefaultBin(), Model: model, NativeSessionID: id,
		Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"hello"`)}}, StateDir: t.TempDir(),
		RouterURL: "http://127.0.0.1:1", RouterKey: "probe-key"}
	cmd, err := a.Command(turn)
	if err != nil {
		t.Fatalf("%s Command: %v", a.Name(), err)
	}
	var all []string
	all = append(all, cmd.Args...)
	all = append(all, cmd.Env...)
	all = append(all, string(cmd.Stdin))
	for _, f := range cmd.Files {
		all = append(all, string(f.Data))
	}
	return slices.ContainsFunc(all, func(s string) bool { return strings.Contains(s, id) })
}

// TestCapabilities_EveryHarness checks the capability document of every
// registered harness: it validates against the published JSON Schema and
// the document's rules, and each per-harness claim matches what the
// adapter does. (TestCapabilities_ClaudeCode in bridge/server checks each
// claim against the bridge's behaviour with a scripted CLI.)
func TestCapabilities_EveryHarness(t *testing.T) {
	schemaDoc, err := os.ReadFile(filepath.Join("wire", "capabilities.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := schemacheck.Parse(schemaDoc)
	if err != nil {
		t.Fatal(err)
	}
	adapters := Adapters()
	keys := make([]string, 0, len(adapters))
	for k := range adapters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fake := bridgetest.FakeClaude(t) // answers --version for any harness
	var backends []*engine.Backend
	for _, k := range keys {
		backends = append(backends, &engine.Backend{Adapter: adapters[k], Bin: fake})
	}
	url := serve(t, backends)

	for _, k := range keys {
		a := adapters[k]
		t.Run(a.Name(), func(t *testing.T) {
			resp, err := http.Get(url + "/v1/capabilities?model=" + a.Name() + "/" + "some-model")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("GET /v1/capabilities = %d %s", resp.StatusCode, raw)
			}
			if err := schema.Validate(raw); err != nil {
				t.Errorf("the document does not validate against capabilities.schema.json:\n%v\n%s", err, raw)
			}
			var c wire.Capabilities
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("the document breaks a rule: %v", err)
			}

			cont, _ := a.(harness.Continuer)
			claimed := cont != nil && cont.ContinuesSessions()
			if does := resumes(t, a, "native-probe-3f9c"); does != claimed || c.Sessions.Continue != claimed {
				t.Errorf("sessions.continue = %v (declared %v), but Command resumes the native session: %v", c.Sessions.Continue, claimed, does)
			}
			if (c.RetainedControl != nil) != c.Sessions.Continue {
				t.Errorf("retainedControl claimed %v with sessions.continue %v: it needs continuation and holds with it", c.RetainedControl != nil, c.Sessions.Continue)
			}
			_, retained := a.(harness.Retained)
			asks := retained
			if qc, ok := a.(harness.QuestionClaimer); ok {
				asks = retained && qc.ClaimsInteractions()
			}
			if (c.Interactions != nil) != (asks && claimed) {
				t.Errorf("interactions claimed %v, but retained native turns with proven questions: %v", c.Interactions != nil, asks)
			}
			nc, _ := a.(harness.NativeContinuer)
			native := retained && claimed && nc != nil && nc.ContinuesNatively()
			if (c.NativeContinuation != nil) != native {
				t.Errorf("nativeContinuation claimed %v, but retained sessions with proven native continuation: %v", c.NativeContinuation != nil, native)
			}
			if nc := c.NativeContinuation; nc != nil && (!nc.AtomicBoundary || !nc.RequestIdempotency) {
				t.Errorf("nativeContinuation = %+v, want both guarantees", *nc)
			}
			if !c.Streaming.Live || !c.Streaming.Replay || !c.Streaming.Detach || !c.Streaming.TurnIdempotency {
				t.Errorf("streaming = %+v, want all of it (the engine provides it for every harness)", c.Streaming)
			}
		})
	}
}

// serve starts a bridge server (no bearer) with backends.
func serve(t *testing.T, backends []*engine.Backend) string {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(context.Background(), st, engine.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.Close(ctx)
	})
	srv, err := server.New(server.Options{Engine: eng, Backends: backends})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts.URL
}
