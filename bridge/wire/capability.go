package wire

import (
	"errors"
	"fmt"
	"slices"
)

// Capabilities is the capability document of GET /v1/capabilities?model=:
// what one exact model route of the bridge really does. Its shape is the
// TypeScript AgentEnvironmentCapabilities document (a strict object: no
// other keys); an absent optional block means "not supported", and a
// bridge claims nothing that does not work. capabilities.schema.json is the
// JSON Schema of this type.
type Capabilities struct {
	Profile   ProfileCaps   `json:"profile"`
	Streaming StreamingCaps `json:"streaming"`
	Sessions  SessionCaps   `json:"sessions"`
	// EnvironmentCreate is claimed where keyed environment creation is
	// durable; a bridge never claims it.
	EnvironmentCreate *EnvironmentCreateCaps `json:"environmentCreate,omitempty"`
	// RetainedControl is claimed only with every one of its flags, replay,
	// detach, turn idempotency and session continuation.
	RetainedControl *RetainedControlCaps `json:"retainedControl,omitempty"`
	// NativeContinuation is claimed only where POST
	// /v1/sessions/:id/continue works.
	NativeContinuation *NativeContinuationCaps `json:"nativeContinuation,omitempty"`
	// Interactions is claimed where the harness raises interactions that
	// POST /v1/runs/:runId/interactions/:interactionId/respond answers.
	Interactions *InteractionCaps `json:"interactions,omitempty"`
	Workspace    WorkspaceCaps    `json:"workspace"`
	Branching    BranchingCaps    `json:"branching"`
	// Placement reports whether the environment can say where it runs.
	Placement bool `json:"placement"`
	// Usage reports whether turns report their model token usage.
	Usage bool `json:"usage"`
	// Confidential reports confidential (attested) execution.
	Confidential bool `json:"confidential"`
	// ExactProcess is claimed where exact process environments (POST
	// /v1/exact/environments) run: with the egress modes enforced.
	ExactProcess *ExactProcessCaps `json:"exactProcess,omitempty"`
	Observation  *ObservationCaps  `json:"observation,omitempty"`
	// InteractiveTerminal and InteractiveAgent belong to providers that
	// provision compute; a bridge never claims them.
	InteractiveTerminal *InteractiveTerminalCaps `json:"interactiveTerminal,omitempty"`
	InteractiveAgent    *InteractiveAgentCaps    `json:"interactiveAgent,omitempty"`
}

// ProfileCaps says which parts of an agent profile the route applies.
type ProfileCaps struct {
	NamedProfiles bool             `json:"namedProfiles"`
	SystemPrompt  SystemPromptCaps `json:"systemPrompt"`
	Instructions  bool             `json:"instructions"`
	Tools         bool             `json:"tools"`
	Permissions   bool             `json:"permissions"`
	MCP           bool             `json:"mcp"`
	Subagents     bool             `json:"subagents"`
	Resources     ResourceCaps     `json:"resources"`
	Hooks         bool             `json:"hooks,omitempty"`
	Modes         bool             `json:"modes,omitempty"`
	RuntimeUpdate bool             `json:"runtimeUpdate"`
	Validation    bool             `json:"validation"`
	// Extensions are the profile extension namespaces understood.
	Extensions []string `json:"extensions,omitempty" jsonschema:"uniqueItems=true,minLength=1"`
}

// SystemPromptCaps says whether a profile's system prompt can replace, or
// be appended to, the harness's own.
type SystemPromptCaps struct {
	Replace bool `json:"replace"`
	Append  bool `json:"append"`
}

// ResourceCaps says which profile resources the route materialises.
type ResourceCaps struct {
	Files        bool `json:"files"`
	Instructions bool `json:"instructions"`
	Tools        bool `json:"tools,omitempty"`
	Skills       bool `json:"skills,omitempty"`
	Agents       bool `json:"agents,omitempty"`
	Commands     bool `json:"commands,omitempty"`
}

// StreamingCaps are the streaming capabilities: live SSE, replay from a
// cursor, detaching a reader without stopping the run, and a repeated turn
// (same run id and request) attaching to the same run.
type StreamingCaps struct {
	Live            bool `json:"live"`
	Replay          bool `json:"replay"`
	Detach          bool `json:"detach"`
	TurnIdempotency bool `json:"turnIdempotency"`
}

// SessionCaps are the session capabilities. Continue: a later turn of the
// same session continues the harness's own conversation.
type SessionCaps struct {
	Continue bool `json:"continue"`
	List     bool `json:"list"`
	Messages bool `json:"messages"`
}

// EnvironmentCreateCaps is the `environmentCreate` block.
type EnvironmentCreateCaps struct {
	Idempotency      string `json:"idempotency" jsonschema:"enum=durable"`
	SecretReferences bool   `json:"secretReferences"`
}

// RetainedControlCaps are claimed only all together.
type RetainedControlCaps struct {
	ExactRunIdentity        bool `json:"exactRunIdentity"`
	ResultIdentity          bool `json:"resultIdentity"`
	EventIdentity           bool `json:"eventIdentity"`
	CancellationIdempotency bool `json:"cancellationIdempotency"`
}

// NativeContinuationCaps is the `nativeContinuation` block: claimed only
// where POST /v1/sessions/:id/continue admits a turn atomically with the
// context boundary check and repeats the outcome for a repeated request id.
type NativeContinuationCaps struct {
	AtomicBoundary     bool `json:"atomicBoundary"`
	RequestIdempotency bool `json:"requestIdempotency"`
}

// Interaction answer field types and response scopes.
const (
	FieldText    = "text"
	FieldNumber  = "number"
	FieldBoolean = "boolean"
	FieldSelect  = "select"
	FieldSecret  = "secret"

	ScopeInteraction = "interaction"
	ScopeSession     = "session"
	ScopePersistent  = "persistent"
)

// InteractionCaps is the `interactions` block: which interaction kinds a
// harness raises, which answers it takes and how responses behave.
// SecretAnswers equals whether AnswerFieldTypes holds "secret".
type InteractionCaps struct {
	Kinds               []string `json:"kinds" jsonschema:"minItems=1,uniqueItems=true,minLength=1"`
	AnswerFieldTypes    []string `json:"answerFieldTypes" jsonschema:"minItems=1,uniqueItems=true,enum=text,enum=number,enum=boolean,enum=select,enum=secret"`
	ResponseScopes      []string `json:"responseScopes" jsonschema:"minItems=1,uniqueItems=true,enum=interaction,enum=session,enum=persistent"`
	SecretAnswers       bool     `json:"secretAnswers"`
	ConcurrentRequests  bool     `json:"concurrentRequests"`
	Replay              bool     `json:"replay"`
	ResponseIdempotency bool     `json:"responseIdempotency"`
}

// WorkspaceCaps are the workspace operations of an environment.
type WorkspaceCaps struct {
	Read     bool `json:"read"`
	Write    bool `json:"write"`
	Exec     bool `json:"exec"`
	Git      bool `json:"git"`
	Upload   bool `json:"upload"`
	Download bool `json:"download"`
}

// BranchingCaps are the checkpoint and fork operations of an environment.
type BranchingCaps struct {
	Checkpoint bool `json:"checkpoint"`
	Fork       bool `json:"fork"`
	RetrySafe  bool `json:"retrySafe,omitempty"`
	Lookup     bool `json:"lookup,omitempty"`
	Cleanup    bool `json:"cleanup,omitempty"`
}

// ExactProcessCaps is the `exactProcess` block.
type ExactProcessCaps struct {
	Egress []string `json:"egress" jsonschema:"minItems=1,uniqueItems=true,enum=blocked,enum=strict"`
}

// ObservationCaps is the `observation` block: which observation surfaces
// carry a value. Compute shape, resource use, compute cost and account
// usage are never known to a bridge that provisions nothing.
type ObservationCaps struct {
	Identity       bool `json:"identity"`
	Lifecycle      bool `json:"lifecycle"`
	Endpoint       bool `json:"endpoint"`
	Placement      bool `json:"placement"`
	Resources      bool `json:"resources"`
	ResourceUse    bool `json:"resourceUse"`
	ModelUsage     bool `json:"modelUsage"`
	ComputeBilling bool `json:"computeBilling"`
	AccountUsage   bool `json:"accountUsage"`
}

// InteractiveTerminalCaps is the `interactiveTerminal` block.
type InteractiveTerminalCaps struct {
	Attach   bool `json:"attach"`
	Input    bool `json:"input"`
	Resize   bool `json:"resize"`
	Reattach bool `json:"reattach"`
}

// InteractiveAgentCaps is the `interactiveAgent` block.
type InteractiveAgentCaps struct {
	Start      bool `json:"start"`
	Control    bool `json:"control"`
	Status     bool `json:"status"`
	Attach     bool `json:"attach"`
	Reattach   bool `json:"reattach"`
	SendPrompt bool `json:"sendPrompt"`
	Input      bool `json:"input"`
	Resize     bool `json:"resize"`
	Stop       bool `json:"stop"`
}

// RetainedControlComplete reports whether the document proves the whole
// retained-control contract: exact run, result, event and cancellation
// identity, with replay, detach, turn idempotency and session continuation.
func (c *Capabilities) RetainedControlComplete() bool {
	rc := c.RetainedControl
	return rc != nil && rc.ExactRunIdentity && rc.ResultIdentity && rc.EventIdentity && rc.CancellationIdempotency &&
		c.Streaming.Replay && c.Streaming.Detach && c.Streaming.TurnIdempotency && c.Sessions.Continue
}

// Validate checks the rules of the document that a JSON Schema does not
// express (the TypeScript schema's refinements): a present block claims
// its whole contract, answer types agree with secretAnswers, lists hold
// no duplicates, and capabilities that need another one have it.
func (c *Capabilities) Validate() error {
	var errs []error
	if c.RetainedControl != nil && !c.RetainedControlComplete() {
		errs = append(errs, errors.New("retainedControl requires exact run, result, event, cancellation, replay, detach, turn, and session identity together"))
	}
	if nc := c.NativeContinuation; nc != nil && (!nc.AtomicBoundary || !nc.RequestIdempotency || !c.Sessions.Continue) {
		errs = append(errs, errors.New("nativeContinuation requires session continuation, atomic boundary admission, and request idempotency together"))
	}
	if in := c.Interactions; in != nil {
		if slices.Contains(in.AnswerFieldTypes, FieldSecret) != in.SecretAnswers {
			errs = append(errs, errors.New("interactions.secretAnswers must agree with the secret answer field type"))
		}
		for _, f := range []struct {
			name string
			list []string
		}{{"kinds", in.Kinds}, {"answerFieldTypes", in.AnswerFieldTypes}, {"responseScopes", in.ResponseScopes}} {
			name, list := f.name, f.list
			if len(list) == 0 {
				errs = append(errs, fmt.Errorf("interactions.%s must not be empty", name))
			}
			if hasDuplicate(list) {
				errs = append(errs, fmt.Errorf("interactions.%s must be unique", name))
			}
		}
	}
	durable := []bool{c.Branching.RetrySafe, c.Branching.Lookup, c.Branching.Cleanup}
	if slices.Contains(durable, true) && (slices.Contains(durable, false) || !c.Branching.Checkpoint || !c.Branching.Fork) {
		errs = append(errs, errors.New("retry-safe branching requires checkpoint, fork, lookup, and cleanup together"))
	}
	if ep := c.ExactProcess; ep != nil && (len(ep.Egress) == 0 || hasDuplicate(ep.Egress)) {
		errs = append(errs, errors.New("exactProcess.egress must be non-empty and unique"))
	}
	if t := c.InteractiveTerminal; t != nil && (t.Input || t.Resize || t.Reattach) && !t.Attach {
		errs = append(errs, errors.New("interactive terminal input, resize, and reattach each require attach"))
	}
	if a := c.InteractiveAgent; a != nil {
		if (a.Status || a.Attach || a.Reattach || a.SendPrompt || a.Input || a.Resize || a.Stop) && !a.Start {
			errs = append(errs, errors.New("interactive agent operations each require start"))
		}
		if (a.Attach || a.SendPrompt || a.Input || a.Resize || a.Stop) && !a.Control {
			errs = append(errs, errors.New("interactive agent mutation requires control"))
		}
		if (a.Reattach || a.Input || a.Resize) && !a.Attach {
			errs = append(errs, errors.New("interactive agent reattach, input, and resize each require attach"))
		}
	}
	if hasDuplicate(c.Profile.Extensions) {
		errs = append(errs, errors.New("profile.extensions must be unique"))
	}
	return errors.Join(errs...)
}

func hasDuplicate(list []string) bool {
	seen := make(map[string]bool, len(list))
	for _, v := range list {
		if seen[v] {
			return true
		}
		seen[v] = true
	}
	return false
}

// ExecutionCaps is the execution part of the bridge's capabilities: which
// `execution` objects this bridge honours and which confinement it
// enforces, from its last probe of the jail (at start and at each jailed
// turn). It is served in GET / under capabilities.execution, since the
// per-model document above is the TypeScript interface's strict object,
// which has no key for it.
type ExecutionCaps struct {
	// Kinds are the execution kinds the bridge runs: host. A sandbox is
	// refused (TypeSandboxUnsupported).
	Kinds []string `json:"kinds"`
	// Jail lists the enforced execution.jail modes.
	Jail JailCaps `json:"jail"`
	// NetJail lists the enforced execution.netJail modes.
	NetJail NetJailCaps `json:"netJail"`
	// TimeoutMS reports that execution.timeoutMs bounds the turn.
	TimeoutMS bool `json:"timeoutMs"`
}

// JailCaps are the file-system confinement modes a bridge enforces.
type JailCaps struct {
	// Modes always holds off; write-jail and fs-jail only while the
	// enforcer works on this host.
	Modes []string `json:"modes"`
	// Enforcer names what confines the harness (bwrap).
	Enforcer string `json:"enforcer,omitempty"`
	// Unavailable says why only off is enforced ("" otherwise).
	Unavailable string `json:"unavailable,omitempty"`
	// Floor is the operator's floor (BRIDGE_JAIL_MODE): the mode every
	// turn runs in at least, off for none. A request for less runs at the
	// floor; while the floor is not among Modes, every turn is refused.
	Floor string `json:"floor" jsonschema:"enum=off,enum=write-jail,enum=fs-jail"`
}

// NetJailCaps are the network confinement modes a bridge enforces.
type NetJailCaps struct {
	// Modes always holds off; net-jail only while it can be enforced.
	Modes []string `json:"modes"`
	// Allow is the enforced allow list (the model endpoint, host:port), in
	// the canonical form a request's netJail.allow must equal.
	Allow []string `json:"allow,omitempty"`
	// Unavailable says why net-jail is not enforced ("" otherwise).
	Unavailable string `json:"unavailable,omitempty"`
	// Floor is the operator's floor (BRIDGE_NET_JAIL_MODE): net-jail puts
	// every turn in the network jail, off leaves it to the request.
	Floor string `json:"floor" jsonschema:"enum=off,enum=net-jail"`
}
