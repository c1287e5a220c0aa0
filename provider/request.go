package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Profile is the agent profile an environment runs: which harness, and
// which model by default. It is forwarded to the bridge as
// `agent_profile`.
type Profile struct {
	// Name names the profile.
	Name string `json:"name"`
	// Harness is the bridge harness, e.g. "claude-code", "codex", "pi".
	Harness string `json:"harness,omitempty"`
	// Model is the profile's model choice.
	Model ProfileModel `json:"model,omitzero"`
	// Instructions are extra instructions the harness applies.
	Instructions string `json:"instructions,omitempty"`
}

// ProfileModel is a profile's model choice. Default is a model name with or
// without its harness prefix; Provider is the model's upstream provider
// (Pi routes are harness/provider/model).
type ProfileModel struct {
	Default         string `json:"default,omitempty"`
	Provider        string `json:"provider,omitempty"`
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
}

// Workspace says where the harness works. Cwd is a directory on the host
// that runs the bridge and works only with host execution; RepoURL and
// GitRef ask for a repository checkout, which needs sandbox execution.
type Workspace struct {
	Cwd     string `json:"cwd,omitempty"`
	RepoURL string `json:"repoUrl,omitempty"`
	GitRef  string `json:"gitRef,omitempty"`
}

// CreateRequest describes an environment.
type CreateRequest struct {
	// Profile is the agent profile; required.
	Profile Profile `json:"profile"`
	// Backend overrides Profile.Harness.
	Backend string `json:"backend,omitempty"`
	// Name is a display name.
	Name string `json:"name,omitempty"`
	// Workspace is where the harness works; nil means the bridge default.
	Workspace *Workspace `json:"workspace,omitempty"`
	// Env is added to the harness environment.
	Env map[string]string `json:"env,omitempty"`
	// Metadata is forwarded with every turn.
	Metadata map[string]any `json:"metadata,omitempty"`
	// IdempotencyKey makes Create repeatable: the same key with the same
	// request returns the same environment; with a different request it
	// is a *ConflictError. It also fixes the environment id across
	// processes.
	IdempotencyKey string `json:"-"`
}

// InputPart is one part of a multi-part user message.
type InputPart struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	URL       string `json:"url,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
	Filename  string `json:"filename,omitempty"`
}

// Turn is one user turn.
type Turn struct {
	// Prompt is the user message; Parts replaces it with a multi-part one.
	Prompt string
	Parts  []InputPart
	// Model overrides the environment's model for this turn.
	Model string
	// SessionID continues a CLI conversation; empty starts a new session
	// whose id is the turn's run id.
	SessionID string
	// ExecutionID gives the turn a stable identity: a valid run id is used
	// as the run id itself (else the run id is derived from it), so
	// retrying the same turn attaches to the same run. Empty means the run
	// id. See "Turn identity" in the package doc.
	ExecutionID string
	// TurnID identifies the turn within its session. Empty means the
	// ExecutionID, or for a turn with neither, the run id of a fresh turn.
	TurnID string
	// LastEventID resumes a direct stream after that event.
	LastEventID string
	// Interactions is the requested interaction posture, forwarded exactly:
	// nil is omitted, an empty map is sent as {}. Every key must be an
	// interaction kind the environment advertises.
	Interactions map[string]any
	// Context and ProviderOptions are forwarded as metadata.
	Context         map[string]any
	ProviderOptions map[string]any
	// History is the conversation before this turn, user and assistant
	// messages in order: a session continued on another box carries it
	// (sandbox.Environment.Replace). The bridge gives it to a harness that
	// holds none of the session yet, as a transcript before the prompt,
	// and ignores it once the harness holds the session. It is part of the
	// turn's request (a retry must carry the same).
	History []wire.Message
	// Timeout, when positive, bounds the turn from the moment the call
	// starts: if the run is not terminal by then, the client cancels it on
	// the bridge with a reason naming the timeout and waits for the bridge
	// to confirm it terminal. Stream then ends with a failed status event
	// naming the timeout and a *TimeoutError; Session.Prompt returns a
	// failed TurnResult and the *TimeoutError; Dispatch enforces it from a
	// goroutine the Provider owns until Provider.Close. It is neither sent
	// to the bridge (which bounds runs only by its own per-harness limit)
	// nor part of the run's identity. Zero means no bound; the caller's ctx
	// bounds the call separately and keeps its own error.
	Timeout time.Duration
}

// harnesses are the harness names a route's first segment may name.
var harnesses = map[string]bool{"claude-code": true, "codex": true, "pi": true, "opencode": true, "gemini": true}

// backendOfRoute returns the harness a model route starts with, if known.
func backendOfRoute(route string) string {
	h, _, _ := strings.Cut(route, "/")
	if harnesses[h] {
		return h
	}
	return ""
}

// errNoModel is returned before any network use when no model is known.
var errNoModel = errors.New("cli-bridge requires an explicit bridge model or a profile/backend harness")

// resolveModel picks the bridge model: the turn's, else the provider
// default, else the profile's model.default, qualified by the harness
// (backend or profile harness) and, for a bare name, the profile's model
// provider.
func resolveModel(opts Options, req *CreateRequest, turnModel string) (string, error) {
	harness := req.Backend
	if harness == "" {
		harness = req.Profile.Harness
	}
	model := turnModel
	if model == "" {
		model = opts.DefaultModel
	}
	if model == "" {
		model = req.Profile.Model.Default
	}
	switch {
	case harness == "" && model == "":
		return "", errNoModel
	case harness == "":
		return model, nil
	case model == "" || model == harness:
		return harness, nil
	case strings.HasPrefix(model, harness+"/"):
		return model, nil
	case strings.Contains(model, "/"):
		return harness + "/" + model, nil
	case req.Profile.Model.Provider != "":
		return harness + "/" + req.Profile.Model.Provider + "/" + model, nil
	default:
		return harness + "/" + model, nil
	}
}

// execution returns the execution object a turn carries: the default, or
// a sandbox checkout of the workspace repository.
func execution(opts Options, req *CreateRequest) *Execution {
	if opts.DefaultExecution != nil {
		return opts.DefaultExecution
	}
	if req.Workspace != nil && req.Workspace.RepoURL != "" {
		return &Execution{Kind: ExecutionSandbox, RepoURL: req.Workspace.RepoURL, GitRef: req.Workspace.GitRef}
	}
	return nil
}

// checkWorkspace rejects a cwd that cannot mean a host directory.
func checkWorkspace(opts Options, req *CreateRequest) error {
	w := req.Workspace
	if w == nil || w.Cwd == "" {
		return nil
	}
	if w.RepoURL != "" || w.GitRef != "" {
		return errors.New("cli-bridge workspace.cwd names a host directory; it cannot be combined with a repository workspace")
	}
	if ex := execution(opts, req); ex != nil && ex.Kind != ExecutionHost {
		return fmt.Errorf("cli-bridge workspace.cwd requires host execution, not %q", ex.Kind)
	}
	return nil
}

// chatBody builds the body of POST /v1/chat/completions for one run.
// historyOf is h as the chat route's messages.
func historyOf(h []wire.Message) []any {
	out := make([]any, 0, len(h)+1)
	for _, m := range h {
		out = append(out, m)
	}
	return out
}

func chatBody(opts Options, req *CreateRequest, turn *Turn, model string, r *run) map[string]any {
	var content any = turn.Prompt
	if len(turn.Parts) > 0 {
		content = turn.Parts
	}
	b := map[string]any{
		"model":          model,
		"messages":       append(historyOf(turn.History), map[string]any{"role": "user", "content": content}),
		"stream":         true,
		"session_id":     r.ref.SessionID,
		"run_id":         r.ref.RunID,
		"provider":       r.ref.Provider,
		"environment_id": r.ref.EnvironmentID,
		"execution_id":   r.ref.ExecutionID,
		"agent_profile":  req.Profile,
	}
	if e := req.Profile.Model.ReasoningEffort; e != "" {
		b["effort"] = e
	}
	if req.Env != nil {
		b["env"] = req.Env
	}
	if req.Workspace != nil && req.Workspace.Cwd != "" {
		b["cwd"] = req.Workspace.Cwd
	}
	if ex := execution(opts, req); ex != nil {
		b["execution"] = ex
	}
	if turn.Interactions != nil {
		b["interactions"] = turn.Interactions
	}
	md := map[string]any{}
	for _, m := range []map[string]any{req.Metadata, turn.Context, turn.ProviderOptions} {
		for k, v := range m {
			md[k] = v
		}
	}
	b["metadata"] = md
	return b
}

// ModelRoute is the exact model route an environment of req uses (the
// profile's default model qualified by its harness, as Create resolves
// it), for a caller that discovers the route's capabilities before it
// creates the environment (Options.DefaultModel, then
// Provider.Capabilities).
func ModelRoute(req CreateRequest) (string, error) { return resolveModel(Options{}, &req, "") }
