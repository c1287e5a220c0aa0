package continuation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// digestSchema names the canonical form hashed into the request digest of
// the run a native continuation starts.
const digestSchema = "box-bridge.native-continuation.v1"

// turn checks a continuation against session rs and builds its turn; msg
// says why it cannot be verified.
func (c *Continuer) turn(ctx context.Context, rs store.RetainedSession, in wire.ContinueBody) (_ engine.TurnRequest, msg string) {
	req := in.Request
	b, bare, found := c.opts.Resolve(rs.Model)
	if !found {
		return engine.TurnRequest{}, fmt.Sprintf("model %q names no registered harness", rs.Model)
	}
	if !Native(b.Adapter) {
		return engine.TurnRequest{}, b.Adapter.Name() + " does not offer native continuation"
	}
	if msg := verify(rs, in); msg != "" {
		return engine.TurnRequest{}, msg
	}
	prompt, err := wire.TurnRequest{Message: in.Turn.Prompt, Parts: in.Turn.Parts}.Prompt()
	if err == nil && strings.TrimSpace(prompt) == "" {
		err = errors.New("the turn has no prompt or text parts")
	}
	if err != nil {
		return engine.TurnRequest{}, err.Error()
	}
	var create wire.SessionCreateRequest
	if err := json.Unmarshal(rs.Request, &create); err != nil {
		return engine.TurnRequest{}, "the session's create request cannot be read"
	}
	cwd := ""
	if create.Cwd != nil {
		cwd = *create.Cwd
	}
	confine, timeout, msg := c.opts.Execution(ctx, create.Execution, cwd)
	if msg != "" {
		return engine.TurnRequest{}, msg
	}
	digest, err := wire.Digest(map[string]any{"schema": digestSchema, "harness": b.Adapter.Name(),
		"session": rs.ID, "request": req, "turn": in.Turn})
	if err != nil {
		return engine.TurnRequest{}, err.Error()
	}
	// The continuation's run, execution and turn are named by its
	// operation id, so that the operation repeated names the same run.
	op, run := req.OperationID, req.Run
	return engine.TurnRequest{
		Turn:  store.Turn{SessionID: rs.ID, TurnID: op, Digest: digest},
		RunID: op, Digest: digest, Provider: run.Provider, EnvironmentID: run.EnvironmentID, ExecutionID: op,
		Backend: b, Model: bare, ModelID: rs.Model, Prompt: prompt, Cwd: cwd, Env: create.Env, Policy: rs.Policy,
		Confine: confine, Timeout: timeout,
		Boundary: engine.RevisionBoundary(wire.RunRef{RunID: op, Provider: run.Provider, EnvironmentID: run.EnvironmentID,
			SessionID: rs.ID, ExecutionID: op, RequestDigest: digest}, time.Now()),
	}, ""
}

// verify checks a continuation's digests and that it continues session
// rs, from a boundary of the run it names, on the session's model; it
// says why it cannot be verified.
func verify(rs store.RetainedSession, in wire.ContinueBody) string {
	req := in.Request
	turnDigest, err := wire.ContinuationTurnDigest(in.Turn)
	if err != nil || turnDigest != req.TurnDigest {
		return "request.turnDigest does not match the turn"
	}
	d, err := wire.ContinuationRequestDigest(req)
	if err != nil || d != req.RequestDigest {
		return "request.requestDigest does not match the request"
	}
	switch {
	case req.Run.SessionID != rs.ID:
		return "request.run names session " + req.Run.SessionID + ", not " + rs.ID
	case !bindsRun(req.ExpectedBoundary, req.Run):
		return "request.expectedBoundary does not belong to request.run"
	case in.Turn.Model != "" && !strings.EqualFold(in.Turn.Model, rs.Model):
		return fmt.Sprintf("turn.model %q is not the session's model %q", in.Turn.Model, rs.Model)
	case wire.ValidRunID(req.OperationID) != nil:
		return "request.operationId cannot name the continuation's run"
	}
	return ""
}
