package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Capabilities is what an environment offers: the bridge's capability
// document (GET /v1/capabilities) narrowed to what this client implements.
// An absent block (nil) means the operation is not offered.
type Capabilities struct {
	Profile            json.RawMessage              `json:"profile,omitempty"`
	Streaming          wire.StreamingCaps           `json:"streaming"`
	Sessions           wire.SessionCaps             `json:"sessions"`
	RetainedControl    *wire.RetainedControlCaps    `json:"retainedControl,omitempty"`
	NativeContinuation *wire.NativeContinuationCaps `json:"nativeContinuation,omitempty"`
	Interactions       *wire.InteractionCaps        `json:"interactions,omitempty"`
	Workspace          wire.WorkspaceCaps           `json:"workspace"`
	Branching          wire.BranchingCaps           `json:"branching"`
	Placement          json.RawMessage              `json:"placement,omitempty"`
	Usage              json.RawMessage              `json:"usage,omitempty"`
	Observation        *wire.ObservationCaps        `json:"observation,omitempty"`
}

// RetainedControlProven reports whether the document proves the whole
// retained-control contract: exact run, result, event and cancellation
// identity, with replay, detach, turn idempotency and session continuation.
func (c *Capabilities) RetainedControlProven() bool {
	rc := c.RetainedControl
	return rc != nil && rc.ExactRunIdentity && rc.ResultIdentity && rc.EventIdentity && rc.CancellationIdempotency &&
		c.Streaming.Replay && c.Streaming.Detach && c.Streaming.TurnIdempotency && c.Sessions.Continue
}

// NativeContinuationProven reports whether Session.ContinueNative works.
func (c *Capabilities) NativeContinuationProven() bool {
	nc := c.NativeContinuation
	return c.Sessions.Continue && nc != nil && nc.AtomicBoundary && nc.RequestIdempotency
}

// InteractionsProven reports whether typed interactions (and the retained
// native session transport they need) work.
func (c *Capabilities) InteractionsProven() bool {
	in := c.Interactions
	return in != nil && len(in.Kinds) > 0 && in.Replay && in.ResponseIdempotency && !in.ConcurrentRequests &&
		c.Streaming.Live && c.RetainedControlProven()
}

// localCapabilities is what this client offers before, or without, asking
// the bridge: streaming and turns, observation, and no retained blocks.
func localCapabilities(opts Options) *Capabilities {
	return &Capabilities{
		Streaming:   wire.StreamingCaps{Live: true, Replay: true, Detach: true, TurnIdempotency: true},
		Sessions:    wire.SessionCaps{Continue: true},
		Observation: observationCaps(opts),
	}
}

// narrow intersects a reported document with what this client implements.
func narrow(opts Options, reported *Capabilities) *Capabilities {
	out := &Capabilities{
		Profile:   reported.Profile,
		Streaming: reported.Streaming,
		// The bridge may list and inspect sessions; this client exposes neither.
		Sessions:    wire.SessionCaps{Continue: reported.Sessions.Continue},
		Placement:   reported.Placement,
		Usage:       reported.Usage,
		Observation: observationCaps(opts),
	}
	if reported.RetainedControlProven() {
		out.RetainedControl = &wire.RetainedControlCaps{ExactRunIdentity: true, ResultIdentity: true, EventIdentity: true, CancellationIdempotency: true}
	}
	if reported.NativeContinuationProven() {
		out.NativeContinuation = &wire.NativeContinuationCaps{AtomicBoundary: true, RequestIdempotency: true}
	}
	if reported.InteractionsProven() {
		in := *reported.Interactions
		out.Interactions = &in
	}
	return out
}

// discover reads the capability document of one exact model route.
func (c *client) discover(ctx context.Context, model string) (*Capabilities, error) {
	const op = "discover capabilities"
	_, _, data, err := c.call(ctx, op, http.MethodGet, "/v1/capabilities?model="+url.QueryEscape(model), nil, maxControlBytes, nil)
	if err != nil {
		return nil, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil || probe == nil {
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge capability discovery returned invalid JSON"}
	}
	for _, key := range []string{"streaming", "sessions"} {
		if v, ok := probe[key]; !ok || !bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
			return nil, &ProtocolError{Op: op, Reason: fmt.Sprintf("cli-bridge capability discovery returned an invalid capability document: no %s object", key)}
		}
	}
	var caps Capabilities
	if err := json.Unmarshal(data, &caps); err != nil {
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge capability discovery returned an invalid capability document: " + err.Error()}
	}
	return &caps, nil
}
