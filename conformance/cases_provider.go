package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

func providerCases() []Case {
	return []Case{
		{ID: "provider.capabilities", run: capabilitiesCase,
			Description: "the capability document is strictly valid, claims nothing the bridge lacks, and a disabled operation is refused"},
		{ID: "provider.keyed-create", run: keyedCreateCase,
			Description: "a keyed create repeated with reordered fields returns the same environment; changed keyed input is a conflict"},
		{ID: "provider.turn", run: turnCase,
			Description: "one streamed turn opens with the declared model and reaches a terminal result with usage and the served model"},
		{ID: "provider.plain-turn", run: plainTurnCase,
			Description: "the simplest call completes: an environment with no model and a turn with only a prompt"},
		{ID: "provider.turn-idempotency", run: turnIdempotencyCase,
			Description: "a turn repeated with the same execution id attaches to the same run and asks the model once"},
		{ID: "provider.workspace", run: workspaceCase,
			Description: "the box's workspace takes a file, gives it back and runs a command in it; workspace claims are backed"},
		{ID: "provider.destroy", run: destroyCase,
			Description: "destroy cancels the live run, removes the box, and later calls are refused"},
	}
}

// rawCapabilities reads the box's capability document for the
// environment's model route and decodes it strictly.
func rawCapabilities(c *caseCtx, env *sandbox.Environment) (*wire.Capabilities, string, error) {
	req := c.step("GET /v1/capabilities?model=%s", env.Model())
	ep, err := env.Box().Endpoint(c.ctx, sandbox.BridgePort)
	if err != nil {
		return nil, req, failf(req, "the box's endpoint", "%v", err)
	}
	hr, err := http.NewRequestWithContext(c.ctx, http.MethodGet, ep.URL+"/v1/capabilities?model="+url.QueryEscape(env.Model()), nil)
	if err != nil {
		return nil, req, err
	}
	hr.Header.Set("Authorization", "Bearer "+env.Reference().Bearer)
	resp, err := ep.Client().Do(hr)
	if err != nil {
		return nil, req, failf(req, "the capability document", "%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, req, failf(req, "200 with the capability document", "%d %s (%v)", resp.StatusCode, clip(string(body), 300), err)
	}
	var caps wire.Capabilities
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&caps); err != nil {
		return nil, req, failf(req, "a strict capability document (no unknown key, every value of its type)", "%v in %s", err, clip(string(body), 400))
	}
	if err := caps.Validate(); err != nil {
		return nil, req, failf(req, "a valid capability document", "%v", err)
	}
	return &caps, req, nil
}

func capabilitiesCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	caps, req, err := rawCapabilities(c, env)
	if err != nil {
		return err
	}
	// The Go client's discovery applies the same strict rules.
	p, err := c.bridge(env, provider.Options{DefaultModel: env.Model(), Name: "conformance"})
	if err != nil {
		return err
	}
	disc := c.step("provider.Capabilities (discovery of %s)", env.Model())
	if _, err := p.Capabilities(c.ctx); err != nil {
		return failf(disc, "the document accepted", "%v", err)
	}

	// Claim only what works: blocks that belong to providers that
	// provision compute, and operations the bridge has no route for, are
	// absent.
	var wrong []string
	absent := map[string]bool{"environmentCreate": caps.EnvironmentCreate != nil,
		"interactiveTerminal": caps.InteractiveTerminal != nil, "interactiveAgent": caps.InteractiveAgent != nil,
		"confidential":   caps.Confidential,
		"workspace.read": caps.Workspace.Read, "workspace.write": caps.Workspace.Write, "workspace.exec": caps.Workspace.Exec,
		"workspace.git": caps.Workspace.Git, "workspace.upload": caps.Workspace.Upload, "workspace.download": caps.Workspace.Download}
	for _, name := range slices.Sorted(maps.Keys(absent)) {
		if absent[name] {
			wrong = append(wrong, name)
		}
	}
	if caps.RetainedControl != nil && !(caps.Streaming.Replay && caps.Streaming.Detach && caps.Streaming.TurnIdempotency && caps.Sessions.Continue) {
		wrong = append(wrong, "retainedControl without replay, detach, turn idempotency and session continuation")
	}
	if !caps.Streaming.Live {
		wrong = append(wrong, "streaming.live absent: no turn could stream")
	}
	if len(wrong) > 0 {
		return failf(req, "no claim the bridge cannot back", "claims %s", strings.Join(wrong, ", "))
	}

	if caps.Branching.Checkpoint || caps.Branching.Fork {
		if err := branchingRoutesAnswer(c, env); err != nil {
			return err
		}
	}

	if caps.ExactProcess != nil {
		if err := exactRoutesAnswer(c, env, caps.ExactProcess); err != nil {
			return err
		}
	}

	if caps.Placement {
		r := c.step("Environment.Observe (placement is claimed)")
		obs, err := env.Observe(c.ctx)
		if err != nil || obs.PlacementRequested == "" || obs.Identity.State != provider.Known {
			return failf(r, "an observation naming the environment and where its turns run", "%+v, %v", obs, err)
		}
		c.note("claim placement: the environment observes placement %q", obs.PlacementRequested)
	}

	// What the environment does not claim, it refuses.
	ec := env.Capabilities()
	s, err := env.Session(newID("conformance-caps"), provider.SessionOptions{})
	if err != nil {
		return failf(c.step("environment.Session"), "a session", "%v", err)
	}
	if ec.Interactions == nil {
		r := c.step("Session.RespondToInteraction on an environment that claims no interactions")
		if _, err := s.RespondToInteraction(c.ctx, wire.InteractionCommand{}); !errors.Is(err, vendors.ErrUnsupported) {
			return failf(r, "vendors.ErrUnsupported", "%v", err)
		}
	}
	if ec.NativeContinuation == nil {
		r := c.step("Session.ContextBoundary on an environment that claims no native continuation")
		if _, err := s.ContextBoundary(c.ctx); !errors.Is(err, vendors.ErrUnsupported) {
			return failf(r, "vendors.ErrUnsupported", "%v", err)
		}
	}
	for claim, by := range map[string]string{"streaming.live": "provider.turn", "streaming.replay": "session.replay-cursor",
		"streaming.detach": "session.replay-cursor", "streaming.turnIdempotency": "provider.turn-idempotency",
		"usage": "provider.turn"} {
		c.note("claim %s is exercised by %s", claim, by)
	}
	if caps.Interactions != nil {
		c.note("claim interactions (%s) is exercised by interactions.answer and interactions.refusals", strings.Join(caps.Interactions.Kinds, ", "))
	}
	if caps.RetainedControl != nil {
		c.note("claim retainedControl is exercised by session.rebuilt, session.competing-ref and control.cancel")
	}
	return nil
}

func keyedCreateCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	p, err := c.bridge(env, provider.Options{Name: "conformance-keyed"})
	if err != nil {
		return err
	}
	key := newID("conformance-key")
	mk := func(meta string, env map[string]string) provider.CreateRequest {
		return provider.CreateRequest{Profile: c.h.Profile, IdempotencyKey: key, Env: env,
			Metadata: map[string]any{"suite": "conformance", "labels": json.RawMessage(meta)}}
	}
	first := mk(`{"team":"boxes","tier":1,"tags":["a","b"]}`, map[string]string{"CONFORMANCE_A": "1", "CONFORMANCE_B": "2"})
	// The same request with every object's fields in another order.
	reordered := mk(`{"tags":["a","b"],"tier":1,"team":"boxes"}`, map[string]string{"CONFORMANCE_B": "2", "CONFORMANCE_A": "1"})
	req := c.step("provider.Create keyed %s", key)
	e1, err := p.Create(c.ctx, first)
	if err != nil {
		return failf(req, "an environment", "%v", err)
	}
	req = c.step("provider.Create keyed %s again, fields reordered", key)
	e2, err := p.Create(c.ctx, reordered)
	if err != nil || e2.ID() != e1.ID() {
		return failf(req, "environment "+e1.ID(), "%s, %v", idOf(e2), err)
	}
	// Another process with the same key and request gets the same id.
	p2, err := c.bridge(env, provider.Options{Name: "conformance-keyed"})
	if err != nil {
		return err
	}
	req = c.step("provider.Create keyed %s, reordered, from a new provider", key)
	e3, err := p2.Create(c.ctx, reordered)
	if err != nil || e3.ID() != e1.ID() {
		return failf(req, "environment "+e1.ID(), "%s, %v", idOf(e3), err)
	}
	req = c.step("provider.Create keyed %s with a changed env value", key)
	changed := mk(`{"team":"boxes","tier":1,"tags":["a","b"]}`, map[string]string{"CONFORMANCE_A": "changed", "CONFORMANCE_B": "2"})
	var ce *provider.ConflictError
	if e4, err := p.Create(c.ctx, changed); !errors.As(err, &ce) {
		return failf(req, "a *provider.ConflictError", "%s, %v", idOf(e4), err)
	}
	// The sandbox provider keys its environments the same way: a
	// reconnect from the reference is the same environment.
	e5, err := c.connect(env)
	if err != nil {
		return err
	}
	if e5.ID() != env.ID() {
		return failf(c.step("Connect(reference)"), "environment "+env.ID(), "environment %s", e5.ID())
	}
	return nil
}

func idOf(e *provider.Environment) string {
	if e == nil {
		return "no environment"
	}
	return "environment " + e.ID()
}

func turnCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	req := c.step("Stream(%q) on %s", plainPrompt, env.Model())
	evs, text, err := c.stream(c.ctx, env, provider.Turn{Prompt: plainPrompt})
	if err != nil {
		return failf(req, "a completed turn", "%v after %s", err, listEvents(evs))
	}
	if len(evs) == 0 || evs[0].Type != provider.EventExecutionStarted || evs[0].Model != env.Model() || evs[0].RunID == "" {
		first := "nothing"
		if len(evs) > 0 {
			first = fmt.Sprintf("%s (model %q, run %q)", evs[0].Type, evs[0].Model, evs[0].RunID)
		}
		return failf(req, "execution.started naming the declared model "+env.Model(), "the first event is %s", first)
	}
	if end := evs[len(evs)-1]; !completed(end) {
		return failf(req, "a terminal result, or a completed status", "the last event is %s %s %q", end.Type, end.Status, end.Detail)
	}
	if err := c.wantText(req, text, ReplyText); err != nil {
		return err
	}
	var usage *provider.Usage
	var served []string
	for _, ev := range evs {
		if ev.Usage != nil {
			usage = ev.Usage
		}
		if len(ev.ProviderModels) > 0 {
			served = ev.ProviderModels
		}
	}
	switch {
	case usage == nil:
		return failf(req, "usage on the turn", "no usage in %s", listEvents(evs))
	case usage.InputTokens <= 0 && usage.OutputTokens <= 0:
		return failf(req, "measured token counts", "usage %+v", *usage)
	case usage.Cost != nil:
		return failf(req, "usage without the bridge's cost estimate", "cost %v", *usage.Cost)
	case len(served) == 0:
		return failf(req, "the served model, as the model API named it", "no provider models in %s", listEvents(evs))
	case c.local() != nil && served[0] != ServedModel:
		return failf(req, "served model "+ServedModel, "served models %v", served)
	}
	c.note("served by %s; usage %d in, %d out (%s)", strings.Join(served, ","), usage.InputTokens, usage.OutputTokens, usage.Provenance)
	return nil
}

// plainTurnCase is the simplest call a caller makes: a profile naming
// only the harness, a turn naming only its prompt. A harness that needs
// an explicit provider/model gets the provider's default for its
// upstream.
func plainTurnCase(c *caseCtx) error {
	env, err := c.create(nil, sandbox.CreateRequest{Profile: provider.Profile{Harness: c.h.Name()}})
	if err != nil {
		return err
	}
	req := c.step("Stream(%q) with no model on %s", plainPrompt, env.Model())
	evs, text, err := c.stream(c.ctx, env, provider.Turn{Prompt: plainPrompt})
	if err != nil {
		return failf(req, "a completed turn", "%v after %s", err, listEvents(evs))
	}
	if end := evs[len(evs)-1]; !completed(end) {
		return failf(req, "a terminal result, or a completed status", "the last event is %s %s %q", end.Type, end.Status, end.Detail)
	}
	return c.wantText(req, text, ReplyText)
}

func turnIdempotencyCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	exec := newID("conformance-exec")
	prompt := plainPrompt + " (" + exec + ")"
	turn := provider.Turn{Prompt: prompt, ExecutionID: exec, SessionID: exec}
	req := c.step("Dispatch(execution %s)", exec)
	ref, err := env.Dispatch(c.ctx, turn)
	if err != nil {
		return failf(req, "an admitted run", "%v", err)
	}
	s, err := env.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		return failf(c.step("environment.Session(%s)", ref.ID), "the session", "%v", err)
	}
	res, err := s.Result(c.ctx)
	if err != nil || !res.Success {
		return failf(c.step("Session.Result"), "a completed run", "%+v, %v", res, err)
	}
	req = c.step("Dispatch(execution %s) again", exec)
	again, err := env.Dispatch(c.ctx, turn)
	if err != nil || again.ControlRef != ref.ControlRef {
		return failf(req, fmt.Sprintf("the same run %+v", ref.ControlRef), "%+v, %v", again.ControlRef, err)
	}
	if l := c.local(); l != nil {
		if n := l.modelCalls(exec); n != 1 {
			return failf(req, "the model asked once", "the model was asked %d times", n)
		}
	}
	return nil
}

func workspaceCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	box := env.Box()
	name := sandbox.Workspace + "/" + newID(".conformance") + ".txt"
	content := []byte("written by the conformance suite\n")
	req := c.step("Box.Write(%s)", name)
	if err := box.Write(c.ctx, name, content, 0o644); err != nil {
		return failf(req, "the file written", "%v", err)
	}
	req = c.step("Box.Read(%s)", name)
	if got, err := box.Read(c.ctx, name); err != nil || !bytes.Equal(got, content) {
		return failf(req, fmt.Sprintf("%q", content), "%q, %v", got, err)
	}
	req = c.step("Box.Exec(cat %s) in %s", name, sandbox.Workspace)
	res, err := box.Exec(c.ctx, vendors.ExecSpec{Command: []string{"cat", name}, Dir: sandbox.Workspace})
	if err != nil || res.ExitCode != 0 || !bytes.Equal(res.Stdout, content) {
		return failf(req, fmt.Sprintf("exit 0 printing %q", content), "exit %d %q %q, %v", res.ExitCode, res.Stdout, res.Stderr, err)
	}
	caps, _, err := rawCapabilities(c, env)
	if err != nil {
		return err
	}
	w := caps.Workspace
	if w.Read || w.Write || w.Exec || w.Git || w.Upload || w.Download {
		return failf("GET /v1/capabilities", "no bridge workspace operation claimed (the bridge serves none)", "workspace %+v", w)
	}
	c.note("the bridge claims no workspace operation; the box's own (write, read, exec) work")
	return nil
}

func destroyCase(c *caseCtx) error {
	env, err := c.env()
	if err != nil {
		return err
	}
	req := c.step("Dispatch(%q)", stallPrompt)
	ref, err := env.Dispatch(c.ctx, provider.Turn{Prompt: stallPrompt})
	if err != nil {
		return failf(req, "an admitted run", "%v", err)
	}
	if l := c.local(); l != nil {
		if err := l.waitPrompt(c.ctx, markerStall); err != nil {
			return failf(req, "the model call in flight", "%v", err)
		}
	}
	req = c.step("Environment.Destroy with run %s live", ref.ControlRef.RunID)
	if err := env.Destroy(c.ctx); err != nil {
		return failf(req, "no error", "%v", err)
	}
	id := env.Reference().BoxID
	if _, err := c.r.t.Vendor.Connect(c.ctx, id); !errors.Is(err, vendors.ErrNotFound) {
		return failf(c.step("Vendor.Connect(%s) after Destroy", id), "vendors.ErrNotFound", "%v", err)
	}
	req = c.step("Dispatch after Destroy")
	if _, err := env.Dispatch(c.ctx, provider.Turn{Prompt: plainPrompt}); !errors.Is(err, provider.ErrDestroyed) {
		return failf(req, "provider.ErrDestroyed", "%v", err)
	}
	return nil
}

// branchingRoutesAnswer backs a branching claim: the box's checkpoint and
// fork lookups answer a key nobody used with not_found, bound to it.
func branchingRoutesAnswer(c *caseCtx, env *sandbox.Environment) error {
	ep, err := env.Box().Endpoint(c.ctx, sandbox.BridgePort)
	if err != nil {
		return err
	}
	lookup := wire.OperationLookup{IdempotencyKey: "conformance-unused-key", RequestDigest: "sha256:" + strings.Repeat("0", 64)}
	for _, path := range []string{"/v1/workspace/checkpoints/lookup", "/v1/workspace/forks/lookup"} {
		r := c.step("POST %s (branching is claimed)", path)
		body, _ := json.Marshal(lookup)
		hr, err := http.NewRequestWithContext(c.ctx, http.MethodPost, ep.URL+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		hr.Header.Set("Authorization", "Bearer "+env.Reference().Bearer)
		hr.Header.Set("Content-Type", "application/json")
		resp, err := ep.Client().Do(hr)
		if err != nil {
			return failf(r, "an answer", "%v", err)
		}
		var got wire.CheckpointResult
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || got.Status != wire.BranchNotFound || got.IdempotencyKey != lookup.IdempotencyKey {
			return failf(r, "200 not_found for the unused key", "%d %+v (%v)", resp.StatusCode, got, err)
		}
	}
	c.note("claim branching: the checkpoint and fork lookups answer")
	return nil
}
