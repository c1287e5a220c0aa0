package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Capabilities is what an environment offers: the bridge's capability
// document (GET /v1/capabilities, wire.Capabilities) narrowed to what this
// client implements. An absent block (nil) means the operation is not
// offered.
type Capabilities wire.Capabilities

// RetainedControlProven reports whether the document proves the whole
// retained-control contract: exact run, result, event and cancellation
// identity, with replay, detach, turn idempotency and session continuation.
func (c *Capabilities) RetainedControlProven() bool {
	return (*wire.Capabilities)(c).RetainedControlComplete()
}

// NativeContinuationProven reports whether Session.ContinueNative works.
func (c *Capabilities) NativeContinuationProven() bool {
	nc := c.NativeContinuation
	return c.Sessions.Continue && nc != nil && nc.AtomicBoundary && nc.RequestIdempotency
}

// InteractionsProven reports whether typed interactions (and the retained
// native session transport they need) work. Concurrent requests are
// fine: every interaction event carries its own binding, and each is
// answered by its own command.
func (c *Capabilities) InteractionsProven() bool {
	in := c.Interactions
	return in != nil && len(in.Kinds) > 0 && in.Replay && in.ResponseIdempotency &&
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
	profile := reported.Profile
	profile.Extensions = slices.Clone(profile.Extensions)
	// This client has no profile validator, whatever the bridge has.
	profile.Validation = false
	out := &Capabilities{
		Profile:   profile,
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
		in.Kinds, in.AnswerFieldTypes, in.ResponseScopes = slices.Clone(in.Kinds), slices.Clone(in.AnswerFieldTypes), slices.Clone(in.ResponseScopes)
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
	invalid := func(why string) error {
		return &ProtocolError{Op: op, Reason: "cli-bridge capability discovery returned an invalid capability document: " + why}
	}
	for _, key := range []string{"profile", "streaming", "sessions", "workspace", "branching", "placement", "usage", "confidential"} {
		if _, ok := probe[key]; !ok {
			return nil, invalid("no " + key)
		}
	}
	// The document is a strict object: an unknown key, or a value of
	// another type, is refused rather than read as "not supported".
	var caps wire.Capabilities
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&caps); err != nil {
		return nil, invalid(err.Error())
	}
	if err := caps.Validate(); err != nil {
		return nil, invalid(err.Error())
	}
	return (*Capabilities)(&caps), nil
}
