package provider

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// run is one bridge run as this process knows it. ref.RequestDigest is
// empty until the bridge admitted the run.
type run struct {
	mu     sync.Mutex
	ref    ControlRef
	turnID string
	model  string
	body   []byte // the chat request; nil for a run known only by reference
	native bool   // admitted through the retained native session routes

	cancel  *cancelOp
	readers map[*int]context.CancelCauseFunc
}

// cancelOp is one in-flight cancellation shared by concurrent callers.
type cancelOp struct {
	done chan struct{}
	snap *wire.RunSnapshot
	err  error
}

func (r *run) controlRef() ControlRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ref
}

func (r *run) admitted() bool { return r.controlRef().RequestDigest != "" }

// addReader registers a reader so a confirmed cancellation can end it.
func (r *run) addReader(cancel context.CancelCauseFunc) func() {
	key := new(int)
	r.mu.Lock()
	if r.readers == nil {
		r.readers = map[*int]context.CancelCauseFunc{}
	}
	r.readers[key] = cancel
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.readers, key)
		r.mu.Unlock()
	}
}

// runID picks the run id of a turn: its execution id when that is a valid
// run id, else "agent-" and the SHA-256 of environment, session and
// execution id (or, without one, the turn's key: its TurnID or a fresh
// nonce).
func runID(environmentID string, turn *Turn, key string) string {
	if turn.ExecutionID != "" && wire.ValidRunID(turn.ExecutionID) == nil {
		return turn.ExecutionID
	}
	exec := turn.ExecutionID
	if exec == "" {
		exec = key
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", environmentID, turn.SessionID, exec)
	return "agent-" + hex.EncodeToString(h.Sum(nil))
}

// prepareRun fixes the identity of a new run by the rule of the package
// doc ("Turn identity"): what the caller gave is kept, the rest is derived
// from it, and only a turn with neither ExecutionID nor TurnID draws a
// fresh nonce, once, here.
func prepareRun(providerName, environmentID string, turn *Turn) (*run, error) {
	turnID := turn.TurnID
	if turnID == "" {
		// A retry of the same execution is the same turn; a reattached
		// run (Environment.Session with a ControlRef) assumes the same.
		turnID = turn.ExecutionID
	}
	key := turnID
	if key == "" {
		key = rand.Text()
	}
	id := runID(environmentID, turn, key)
	r := &run{turnID: turnID, ref: ControlRef{RunID: id, Provider: providerName, EnvironmentID: environmentID, SessionID: turn.SessionID, ExecutionID: turn.ExecutionID}}
	if r.ref.SessionID == "" {
		r.ref.SessionID = id
	}
	if r.ref.ExecutionID == "" {
		r.ref.ExecutionID = id
	}
	if r.turnID == "" {
		r.turnID = r.ref.ExecutionID // a fresh turn is named by its run
	}
	for name, v := range map[string]string{"session id": r.ref.SessionID, "execution id": r.ref.ExecutionID, "turn id": r.turnID} {
		if err := wire.ValidIdentifier(v); err != nil {
			return nil, fmt.Errorf("cli-bridge %s %w", name, err)
		}
	}
	return r, nil
}

// bindHeaders checks the X-Run-* headers of an answer against the run.
// With required (an admission), the run id, digest and all coordinates must
// be present; otherwise what is present must agree.
func (r *run) bindHeaders(op string, h http.Header, required bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := h.Get(wire.HeaderRunID)
	digest := h.Get(wire.HeaderRunRequestDigest)
	if id != "" && id != r.ref.RunID {
		return &IdentityMismatchError{Op: op, Reason: fmt.Sprintf("cli-bridge accepted run %q for requested run %q", id, r.ref.RunID)}
	}
	if required && id == "" {
		return &ProtocolError{Op: op, Reason: "cli-bridge response omitted X-Run-Id"}
	}
	if digest != "" && !digestPattern.MatchString(digest) {
		return &ProtocolError{Op: op, Reason: "cli-bridge returned a malformed X-Run-Request-Digest"}
	}
	if required && digest == "" {
		return &ProtocolError{Op: op, Reason: "cli-bridge dispatch response omitted X-Run-Request-Digest"}
	}
	if digest != "" && r.ref.RequestDigest != "" && digest != r.ref.RequestDigest {
		return &IdentityMismatchError{Op: op, Reason: fmt.Sprintf("cli-bridge changed request digest for run %q from %q to %q", r.ref.RunID, r.ref.RequestDigest, digest)}
	}
	coords := map[string]string{
		wire.HeaderRunProvider: r.ref.Provider, wire.HeaderRunEnvironmentID: r.ref.EnvironmentID,
		wire.HeaderRunSessionID: r.ref.SessionID, wire.HeaderRunExecutionID: r.ref.ExecutionID,
	}
	for name, want := range coords {
		got := h.Get(name)
		if got == "" && required {
			return &ProtocolError{Op: op, Reason: "cli-bridge response omitted exact run coordinates"}
		}
		if got != "" && got != want {
			return &IdentityMismatchError{Op: op, Reason: "cli-bridge returned another retained run identity"}
		}
	}
	if digest != "" {
		r.ref.RequestDigest = digest
	}
	return nil
}

// bindSnapshot checks a run snapshot against the run and learns its
// digest.
func (r *run) bindSnapshot(op string, s *wire.RunSnapshot) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := checkSnapshot(op, s); err != nil {
		return err
	}
	got := ControlRef{RunID: s.ID, Provider: s.Provider, EnvironmentID: s.EnvironmentID, SessionID: s.SessionID, ExecutionID: s.ExecutionID, RequestDigest: s.RequestDigest}
	want := r.ref
	if want.RequestDigest == "" {
		want.RequestDigest = got.RequestDigest
	}
	if got != want {
		return &IdentityMismatchError{Op: op, Reason: "cli-bridge returned another retained run identity"}
	}
	r.ref = got
	return nil
}

// checkSnapshot validates the shape of a snapshot.
func checkSnapshot(op string, s *wire.RunSnapshot) error {
	switch s.Status {
	case wire.StatusRunning, wire.StatusDone, wire.StatusError, wire.StatusCancelled, wire.StatusUnknown:
	default:
		return &ProtocolError{Op: op, Reason: "cli-bridge run status returned an invalid snapshot"}
	}
	if s.ID == "" || (s.Status == wire.StatusRunning && s.Terminal) {
		return &ProtocolError{Op: op, Reason: "cli-bridge run status returned an invalid snapshot"}
	}
	if s.Provider == "" || s.EnvironmentID == "" || s.SessionID == "" || s.ExecutionID == "" || !digestPattern.MatchString(s.RequestDigest) {
		return &ProtocolError{Op: op, Reason: "cli-bridge run status omitted exact run coordinates"}
	}
	return nil
}

// getSnapshot reads GET /v1/runs/:id, long-polling up to waitMS when it is
// positive. A 404 is a *NotFoundError.
func (c *client) getSnapshot(ctx context.Context, op, runID string, waitMS int) (*wire.RunSnapshot, error) {
	path := "/v1/runs/" + url.PathEscape(runID)
	if waitMS > 0 {
		path += "?wait_ms=" + strconv.Itoa(min(waitMS, wire.MaxWaitMS))
	}
	_, _, data, err := c.call(ctx, op, http.MethodGet, path, nil, maxControlBytes, nil)
	if err != nil {
		return nil, err
	}
	var s wire.RunSnapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, &ProtocolError{Op: op, Reason: "cli-bridge run status returned invalid JSON"}
	}
	return &s, nil
}

// snapshot reads and binds the run's snapshot.
func (c *client) snapshot(ctx context.Context, op string, r *run, waitMS int) (*wire.RunSnapshot, error) {
	s, err := c.getSnapshot(ctx, op, r.controlRef().RunID, waitMS)
	if err != nil {
		return nil, err
	}
	if err := r.bindSnapshot(op, s); err != nil {
		return nil, err
	}
	return s, nil
}

// terminalSnapshot waits for the bridge to report the run terminal.
func (c *client) terminalSnapshot(ctx context.Context, op string, r *run) (*wire.RunSnapshot, error) {
	s, err := c.snapshot(ctx, op, r, wire.MaxWaitMS)
	if err != nil {
		return nil, err
	}
	if !s.Terminal || s.Status == wire.StatusRunning {
		return nil, &ProtocolError{Op: op, Reason: fmt.Sprintf("cli-bridge run %q remained active after its stream ended", s.ID)}
	}
	return s, nil
}
