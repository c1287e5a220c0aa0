package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// contextCounts are the figures of the portable context routes that GET
// /metrics reports: plans made, transfers admitted, fresh sessions they
// created and native continuations admitted.
type contextCounts struct {
	plans, transfers, sessions, continuations atomic.Int64
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
		if len(d.Parts) != len(m.Parts) {
			return ctx, false, fmt.Errorf("message %s: every part must be decided exactly once", m.ID)
		}
		parts := slices.Clone(d.Parts)
		slices.SortFunc(parts, func(a, b wire.PartPlan) int { return a.PartIndex - b.PartIndex })
		out := wire.ContextMessage{ID: m.ID, Role: m.Role, Timestamp: m.Timestamp, Metadata: m.Metadata, Parts: []json.RawMessage{}}
		kept := map[int]bool{}
		for i, p := range parts {
			if p.PartIndex != i {
				return ctx, false, fmt.Errorf("message %s: every part must be decided exactly once", m.ID)
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
				return ctx, false, fmt.Errorf("message %s part %d cannot travel as decided", m.ID, i)
			}
		}
		if d.Action == wire.ActionOmit {
			continue
		}
		if len(out.Parts) == 0 {
			return ctx, false, fmt.Errorf("included message %s keeps no part", m.ID)
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
		if m.Parts == nil || !validRecord(m.Metadata) {
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

func (s *Server) planContext(w http.ResponseWriter, r *http.Request) {
	var req wire.ContextPlanRequest
	if !s.branchRequest(w, r, &req) {
		return
	}
	err := wire.ValidIdentifier(req.RequestID)
	if err == nil {
		err = checkContext(req.Source, "source")
	}
	if err == nil && req.MaxInputTokens != nil && *req.MaxInputTokens <= 0 {
		err = errors.New("maxInputTokens must be positive")
	}
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if !checkDigest(w, req.RequestDigest, req.Material(), "plan") {
		return
	}
	var decisions []wire.MessagePlan
	for _, m := range req.Source.Messages {
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
	if decisions == nil {
		decisions = []wire.MessagePlan{}
	}
	out, changed, err := applyPlan(req.Source, decisions)
	var est int64
	if err == nil {
		est, err = estimateTokens(out.Messages)
	}
	if err != nil {
		s.serverError(w, "plan context", err)
		return
	}
	s.counts.plans.Add(1)
	res := wire.ContextPlanResult{RequestID: req.RequestID, RequestDigest: req.RequestDigest}
	if req.MaxInputTokens != nil && est > *req.MaxInputTokens {
		res.Status, res.EstimatedTokens, res.MaxInputTokens = wire.PlanOverLimit, &est, req.MaxInputTokens
		res.Message = fmt.Sprintf("the context is about %d tokens, over the budget of %d", est, *req.MaxInputTokens)
		writeJSON(w, http.StatusOK, res)
		return
	}
	plan := wire.ContextPlan{PlanID: "plan_" + strings.TrimPrefix(req.RequestDigest, "sha256:")[:32], Source: req.Source,
		Destination: req.Destination, Messages: decisions, Context: out, EstimatedTokens: &est,
		RequiresAcceptance: changed || req.Source.Completeness == wire.ContextPartial}
	if plan.Digest, err = wire.Digest(plan.Material()); err != nil {
		s.serverError(w, "plan context", err)
		return
	}
	res.Status, res.Plan = wire.PlanReady, &plan
	writeJSON(w, http.StatusOK, res)
}

// checkTransfer checks a transfer request: its digests, its acceptance and
// that its plan's context is what its decisions make of its source, sent
// to a destination apart from the source.
func checkTransfer(req wire.ContextTransferRequest) error {
	p := req.Plan
	if err := wire.ValidIdentifier(req.OperationID); err != nil {
		return errors.New("operationId " + err.Error())
	}
	if err := checkContext(p.Source, "plan.source"); err != nil {
		return err
	}
	if err := checkContext(p.Context, "plan.context"); err != nil {
		return err
	}
	ctx, changed, err := applyPlan(p.Source, p.Messages)
	if err != nil {
		return err
	}
	if ctx.Digest != p.Context.Digest {
		return errors.New("plan.context is not what the plan's decisions make of its source")
	}
	if p.RequiresAcceptance != (changed || p.Source.Completeness == wire.ContextPartial) {
		return errors.New("plan.requiresAcceptance must be true exactly when content changes or the source is partial")
	}
	if want, err := wire.Digest(p.Material()); err != nil || want != p.Digest {
		return errors.New("plan digest does not match its content")
	}
	if req.Acceptance.PlanDigest != p.Digest {
		return errors.New("acceptance.planDigest must be the executed plan's digest")
	}
	if !slices.Contains([]string{"user", "policy", "system"}, req.Acceptance.AcceptedBy) {
		return errors.New("acceptance.acceptedBy must be user, policy or system")
	}
	if p.RequiresAcceptance && req.Acceptance.AcceptedBy == "system" {
		return errors.New("a transformed or partial plan requires user or policy acceptance")
	}
	if _, err := time.Parse(time.RFC3339Nano, req.Acceptance.AcceptedAt); err != nil {
		return errors.New("acceptance.acceptedAt must be an ISO date-time")
	}
	d, src := p.Destination, p.Source.Source
	for _, f := range []struct{ name, v string }{{"runner", d.Runner}, {"provider", d.Provider}, {"environmentId", d.EnvironmentID},
		{"sessionId", d.SessionID}, {"executionId", d.ExecutionID}} {
		if err := wire.ValidIdentifier(f.v); err != nil {
			return errors.New("plan.destination." + f.name + " " + err.Error())
		}
	}
	if err := wire.ValidRunID(d.RunID); err != nil {
		return errors.New("plan.destination.runId: " + err.Error())
	}
	if d.EnvironmentID == src.EnvironmentID || d.SessionID == src.SessionID || d.RunID == src.RunID || d.ExecutionID == src.ExecutionID {
		return errors.New("the destination environment, session, run and execution must each differ from the source's")
	}
	return nil
}

// renderContext is the prompt of the destination's first run: the
// transferred conversation, and what to do with it.
func renderContext(c wire.PortableContext) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The conversation below was carried over from another environment (run %s). "+
		"Take it as the history of this conversation.\n", c.Source.RunID)
	for _, m := range c.Messages {
		fmt.Fprintf(&b, "\n[%s]\n", m.Role)
		for _, raw := range m.Parts {
			var p map[string]string
			json.Unmarshal(raw, &p)
			name := p["filename"]
			switch p["type"] {
			case "text":
				b.WriteString(p["text"] + "\n")
			case "file":
				if p["content"] != "" {
					fmt.Fprintf(&b, "(file %s)\n%s\n", name, p["content"])
				} else {
					fmt.Fprintf(&b, "(file %s at %s%s)\n", name, p["url"], p["path"])
				}
			case "image":
				fmt.Fprintf(&b, "(image %s at %s%s)\n", name, p["url"], p["path"])
			}
		}
	}
	b.WriteString("\nReply in one short line that the context is in place.")
	return b.String()
}

func (s *Server) transferContext(w http.ResponseWriter, r *http.Request) {
	var req wire.ContextTransferRequest
	if !s.branchRequest(w, r, &req) {
		return
	}
	if err := checkTransfer(req); err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if !checkDigest(w, req.RequestDigest, req.Material(), "transfer") {
		return
	}
	ctx := r.Context()
	st := s.opts.Engine.Store()
	if got, err := st.GetContextTransfer(ctx, req.OperationID); err == nil {
		s.answerTransfer(w, req, got, wire.TransferReplay)
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		s.serverError(w, "load transfer", err)
		return
	}
	d := req.Plan.Destination
	model := d.Model
	switch {
	case model == "":
		model = d.Runner
	case !strings.HasPrefix(strings.ToLower(model), strings.ToLower(d.Runner)+"/"):
		model = d.Runner + "/" + model
	}
	b, _, found := s.resolveModel(model)
	if !found || !strings.EqualFold(b.Adapter.Name(), d.Runner) {
		writeErrorBody(w, modelNotFound(model))
		return
	}
	if _, ok := b.Adapter.(harness.Retained); !ok {
		writeError(w, wire.TypeCapabilityDenied, b.Adapter.Name()+" keeps no retained session a context can go to")
		return
	}
	// The destination session is bound to this operation: a retry after a
	// crash finds it created for the same operation, any other request
	// finds the id taken.
	create := wire.SessionCreateRequest{ID: d.SessionID, Model: model, InteractionPolicy: wire.PolicyUnattendedDeny,
		Metadata: map[string]any{"contextTransfer": map[string]any{"operationId": req.OperationID, "planDigest": req.Plan.Digest}}}
	var generic map[string]any
	json.Unmarshal(mustJSON(create), &generic)
	digest, err := wire.Digest(generic)
	if err != nil {
		s.serverError(w, "digest session", err)
		return
	}
	rs, created, err := st.CreateSession(ctx, store.RetainedSession{ID: create.ID, Harness: b.Adapter.Name(), Model: model,
		Digest: digest, Request: mustJSON(create), Policy: create.InteractionPolicy})
	if errors.Is(err, store.ErrConflict) {
		writeError(w, wire.TypeSessionConflict, "destination session "+d.SessionID+" exists: a context goes only to a fresh session")
		return
	}
	if err != nil {
		s.serverError(w, "create session", err)
		return
	}
	if created {
		s.counts.sessions.Add(1)
	}
	turn := wire.TurnRequest{Message: renderContext(req.Plan.Context), TurnID: "context-transfer:" + req.OperationID,
		ExecutionID: d.ExecutionID, RunID: d.RunID, Provider: d.Provider, EnvironmentID: d.EnvironmentID}
	var turnObj map[string]any
	json.Unmarshal(mustJSON(turn), &turnObj)
	run, err := s.startTurn(ctx, rs, turn, turnObj, false)
	if err != nil {
		writeTurnError(w, s, rs, turn, err)
		return
	}
	receipt := wire.ContextTransferReceipt{Status: wire.TransferOK, OperationID: req.OperationID, RequestDigest: req.RequestDigest,
		PlanDigest: req.Plan.Digest, ContextDigest: req.Plan.Context.Digest, Source: req.Plan.Source.Source, Destination: d,
		Provider: d.Provider, EnvironmentID: d.EnvironmentID, SessionID: rs.ID, RunID: run.ID, ExecutionID: d.ExecutionID,
		SessionCreatedForOperation: req.OperationID, SessionCreatedAt: rfc3339(rs.CreatedAt),
		TransferredMessageIDs: []string{}, OmittedMessageIDs: []string{}, AdmittedAt: rfc3339(run.StartedAt)}
	for _, m := range req.Plan.Messages {
		if m.Action == wire.ActionInclude {
			receipt.TransferredMessageIDs = append(receipt.TransferredMessageIDs, m.MessageID)
		} else {
			receipt.OmittedMessageIDs = append(receipt.OmittedMessageIDs, m.MessageID)
		}
	}
	mine := mustJSON(receipt)
	got, err := st.AddContextTransfer(ctx, store.ContextTransfer{OperationID: req.OperationID, RequestDigest: req.RequestDigest, Receipt: mine})
	if err != nil {
		s.serverError(w, "record transfer", err)
		return
	}
	if string(got.Receipt) == string(mine) {
		s.counts.transfers.Add(1)
		s.answerTransfer(w, req, got, wire.TransferOK)
		return
	}
	s.answerTransfer(w, req, got, wire.TransferReplay)
}

// answerTransfer answers the transfer recorded under the request's
// operation id: its receipt with status, or a conflict.
func (s *Server) answerTransfer(w http.ResponseWriter, req wire.ContextTransferRequest, got store.ContextTransfer, status string) {
	if got.RequestDigest != req.RequestDigest {
		writeJSON(w, http.StatusConflict, wire.ContextTransferConflict{Status: wire.TransferClash, OperationID: req.OperationID,
			RequestDigest: req.RequestDigest, ExistingRequestDigest: got.RequestDigest})
		return
	}
	var receipt wire.ContextTransferReceipt
	if err := json.Unmarshal(got.Receipt, &receipt); err != nil {
		s.serverError(w, "decode transfer", err)
		return
	}
	receipt.Status = status
	code := http.StatusOK
	if status == wire.TransferOK {
		code = http.StatusCreated
	}
	writeJSON(w, code, receipt)
}
