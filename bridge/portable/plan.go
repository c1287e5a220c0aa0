package portable

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Plan plans the transfer of req.Source to req.Destination, with no
// effect: ready with the plan, or over_limit when what can travel is over
// req.MaxInputTokens.
func Plan(req wire.ContextPlanRequest) (wire.ContextPlanResult, error) {
	err := wire.ValidIdentifier(req.RequestID)
	if err == nil {
		err = checkContext(req.Source, "source")
	}
	if err == nil && req.MaxInputTokens != nil && *req.MaxInputTokens <= 0 {
		err = errors.New("maxInputTokens must be positive")
	}
	if err == nil {
		err = wire.CheckDigest(req.RequestDigest, req.Material(), "plan")
	}
	if err != nil {
		return wire.ContextPlanResult{}, &wire.ErrorBody{Type: wire.TypeInvalidRequest, Message: err.Error()}
	}
	decisions := decide(req.Source)
	out, changed, err := applyPlan(req.Source, decisions)
	var est int64
	if err == nil {
		est, err = estimateTokens(out.Messages)
	}
	if err != nil {
		return wire.ContextPlanResult{}, wire.Fault("plan context", err)
	}
	res := wire.ContextPlanResult{RequestID: req.RequestID, RequestDigest: req.RequestDigest}
	if req.MaxInputTokens != nil && est > *req.MaxInputTokens {
		res.Status, res.EstimatedTokens, res.MaxInputTokens = wire.PlanOverLimit, &est, req.MaxInputTokens
		res.Message = fmt.Sprintf("the context is about %d tokens, over the budget of %d", est, *req.MaxInputTokens)
		return res, nil
	}
	plan := wire.ContextPlan{PlanID: "plan_" + strings.TrimPrefix(req.RequestDigest, "sha256:")[:32], Source: req.Source,
		Destination: req.Destination, Messages: decisions, Context: out, EstimatedTokens: &est,
		RequiresAcceptance: changed || req.Source.Completeness == wire.ContextPartial}
	if plan.Digest, err = wire.Digest(plan.Material()); err != nil {
		return wire.ContextPlanResult{}, wire.Fault("plan context", err)
	}
	res.Status, res.Plan = wire.PlanReady, &plan
	return res, nil
}

// decide decides each message and part of source: a portable part is
// included, any other omitted, and a message with no part included is
// omitted whole.
func decide(source wire.PortableContext) []wire.MessagePlan {
	decisions := []wire.MessagePlan{}
	for _, m := range source.Messages {
		d := wire.MessagePlan{MessageID: m.ID, Action: wire.ActionInclude, Parts: []wire.PartPlan{}}
		keep := 0
		for i, p := range m.Parts {
			pp := wire.PartPlan{PartIndex: i, Action: wire.ActionInclude}
			if !portablePart(p) {
				pp.Action, pp.Reason = wire.ActionOmit, "not a text, file or image input part"
			} else {
				keep++
			}
			d.Parts = append(d.Parts, pp)
		}
		if keep == 0 {
			d.Action, d.Reason = wire.ActionOmit, "no part of the message can travel"
			for i := range d.Parts {
				d.Parts[i] = wire.PartPlan{PartIndex: i, Action: wire.ActionOmit, Reason: "its message is omitted"}
			}
		}
		decisions = append(decisions, d)
	}
	return decisions
}

// portablePart says whether a message part is an input part that can
// travel: a text, file or image part with only its own string fields.
func portablePart(raw json.RawMessage) bool {
	var p map[string]any
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return false
	}
	allowed := map[string][]string{
		"text":  {"type", "text"},
		"file":  {"type", "filename", "mediaType", "url", "path", "content"},
		"image": {"type", "filename", "mediaType", "url", "path"},
	}
	typ, _ := p["type"].(string)
	fields, ok := allowed[typ]
	if !ok {
		return false
	}
	if _, ok := p["text"]; typ == "text" && !ok {
		return false
	}
	for k, v := range p {
		if _, isString := v.(string); !isString || !slices.Contains(fields, k) {
			return false
		}
	}
	return true
}

// applyPlan is the context the decisions make of source: the included
// messages with their included (or transformed) parts, and the
// attachments of included parts. changed says whether anything was left
// out or transformed. It fails when the decisions do not cover every
// message and part exactly once.
func applyPlan(source wire.PortableContext, decisions []wire.MessagePlan) (ctx wire.PortableContext, changed bool, err error) {
	byID := map[string]wire.MessagePlan{}
	for _, d := range decisions {
		if _, dup := byID[d.MessageID]; dup {
			return ctx, false, fmt.Errorf("message %s is decided twice", d.MessageID)
		}
		byID[d.MessageID] = d
	}
	if len(byID) != len(source.Messages) {
		return ctx, false, errors.New("the plan must decide every source message exactly once")
	}
	ctx = wire.PortableContext{Source: source.Source, Messages: []wire.ContextMessage{}, Attachments: []wire.ContextAttachment{}}
	included := map[string]map[int]bool{}
	for _, m := range source.Messages {
		d, ok := byID[m.ID]
		if !ok {
			return ctx, false, fmt.Errorf("message %s is not decided", m.ID)
		}
		out, kept, partChanged, err := applyMessage(m, d)
		if err != nil {
			return ctx, false, err
		}
		changed = changed || partChanged
		if d.Action == wire.ActionOmit {
			continue
		}
		included[m.ID] = kept
		ctx.Messages = append(ctx.Messages, out)
	}
	for _, a := range source.Attachments {
		if included[a.MessageID][a.PartIndex] {
			ctx.Attachments = append(ctx.Attachments, a)
		}
	}
	ctx.Completeness = wire.ContextComplete
	if changed || source.Completeness == wire.ContextPartial {
		ctx.Completeness = wire.ContextPartial
	}
	if ctx.Digest, err = wire.Digest(ctx.Material()); err != nil {
		return ctx, false, err
	}
	return ctx, changed, nil
}

// applyMessage is message m as decision d makes it: its included (or
// transformed) parts, the indexes of the parts it kept as they were, and
// whether anything of it was left out or transformed. An included
// message must keep a part.
func applyMessage(m wire.ContextMessage, d wire.MessagePlan) (out wire.ContextMessage, kept map[int]bool, changed bool, err error) {
	if len(d.Parts) != len(m.Parts) {
		return out, nil, false, fmt.Errorf("message %s: every part must be decided exactly once", m.ID)
	}
	parts := slices.Clone(d.Parts)
	slices.SortFunc(parts, func(a, b wire.PartPlan) int { return a.PartIndex - b.PartIndex })
	out = wire.ContextMessage{ID: m.ID, Role: m.Role, Timestamp: m.Timestamp, Metadata: m.Metadata, Parts: []json.RawMessage{}}
	kept = map[int]bool{}
	for i, p := range parts {
		if p.PartIndex != i {
			return out, nil, false, fmt.Errorf("message %s: every part must be decided exactly once", m.ID)
		}
		switch {
		case d.Action == wire.ActionOmit || p.Action == wire.ActionOmit:
			changed = true
		case p.Action == wire.ActionInclude && portablePart(m.Parts[i]):
			out.Parts = append(out.Parts, m.Parts[i])
			kept[i] = true
		case p.Action == "transform" && portablePart(p.Output):
			out.Parts = append(out.Parts, p.Output)
			changed = true
		default:
			return out, nil, false, fmt.Errorf("message %s part %d cannot travel as decided", m.ID, i)
		}
	}
	if d.Action != wire.ActionOmit && len(out.Parts) == 0 {
		return out, nil, false, fmt.Errorf("included message %s keeps no part", m.ID)
	}
	return out, kept, changed, nil
}

// estimateTokens is the estimate the plan reports and the budget is held
// to: a token per four bytes of the canonical messages, rounded up.
func estimateTokens(msgs []wire.ContextMessage) (int64, error) {
	c, err := wire.Canonical(msgs)
	return (int64(len(c)) + 3) / 4, err
}

// checkContext checks a portable context's shape and digest.
func checkContext(c wire.PortableContext, what string) error {
	if c.Completeness != wire.ContextComplete && c.Completeness != wire.ContextPartial {
		return fmt.Errorf("%s.completeness must be complete or partial", what)
	}
	ids := map[string]int{}
	for _, m := range c.Messages {
		if _, dup := ids[m.ID]; dup || wire.ValidIdentifier(m.ID) != nil {
			return fmt.Errorf("%s message ids must be unique identifiers", what)
		}
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return fmt.Errorf("%s message %s: role must be user, assistant or system", what, m.ID)
		}
		if m.Parts == nil || !wire.ValidObject(m.Metadata) {
			return fmt.Errorf("%s message %s: parts must be an array and metadata an object", what, m.ID)
		}
		if _, err := time.Parse(time.RFC3339Nano, m.Timestamp); err != nil {
			return fmt.Errorf("%s message %s: timestamp must be an ISO date-time", what, m.ID)
		}
		ids[m.ID] = len(m.Parts)
	}
	for _, a := range c.Attachments {
		if n, ok := ids[a.MessageID]; !ok || a.PartIndex < 0 || a.PartIndex >= n {
			return fmt.Errorf("%s attachment must reference a part in the context", what)
		}
	}
	if c.Messages == nil || c.Attachments == nil {
		return fmt.Errorf("%s must have messages and attachments arrays", what)
	}
	want, err := wire.Digest(c.Material())
	if err == nil && want != c.Digest {
		err = fmt.Errorf("%s digest does not match its content", what)
	}
	return err
}
