package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
	"github.com/tangle-network/boxctl/vendors"
)

// EventReplaced: a lost box's sessions continue on a new box (BoxID);
// Detail names the lost box.
const EventReplaced EventType = "replaced"

// ContinuedByTranscript is how a session continues on a new box: its
// history, each turn's prompt and answer from the replica, goes to the
// new box's harness with the session's next turn, as a transcript before
// the prompt (provider.Turn.History). No harness state crosses boxes: the
// lost box's is gone with it, so no harness continues natively.
const ContinuedByTranscript = "transcript"

// ErrNotLost is a replacement of a box that is not lost.
var ErrNotLost = errors.New("sandbox: the box is not lost")

// ReplaceOptions configure Environment.Replace.
type ReplaceOptions struct {
	// Request is the new box's; nil: the request that made the lost box
	// (its profile, environment, metadata, workspace and pool), or for an
	// environment from Connect what its Reference holds.
	Request *CreateRequest
	// Create, when set, makes the new environment (a claim from a pool the
	// caller keeps); nil: Provider.Create, which claims from the vendor's
	// own pool when one serves the request.
	Create func(ctx context.Context, req CreateRequest) (*Environment, error)
}

// Replacement says how a lost box's sessions continue.
type Replacement struct {
	// From is the lost box, To the new one.
	From, To string
	// Sessions are the sessions that continue, with how many turns of
	// history each carries and how (ContinuedByTranscript).
	Sessions []ContinuedSession
	// Interrupted are the turns the loss cut short: none runs again by
	// itself; run one again with its Turn, under its own ids.
	Interrupted []InterruptedTurn
}

// ContinuedSession is a session continued on a new box.
type ContinuedSession struct {
	ID     string `json:"id"`
	Turns  int    `json:"turns"`
	Method string `json:"method"`
}

// InterruptedTurn is a turn whose run the box's loss cut short.
type InterruptedTurn struct {
	RunID       string `json:"runId"`
	SessionID   string `json:"sessionId"`
	TurnID      string `json:"turnId,omitempty"`
	ExecutionID string `json:"executionId,omitempty"`
	Prompt      string `json:"prompt"`
}

// Turn is the interrupted turn to run again: its prompt under its own
// session, turn and execution ids, so that running it twice attaches to
// one run.
func (t InterruptedTurn) Turn() provider.Turn {
	return provider.Turn{Prompt: t.Prompt, SessionID: t.SessionID, TurnID: t.TurnID, ExecutionID: t.ExecutionID}
}

// Replace continues a lost box's sessions on a new box: it makes the
// box (o.Create, else Provider.Create), reads each session's turns from
// the broker's replica (the prompts this environment recorded, the
// answers the lost box's bridge shipped), and returns the new
// environment, whose turns in each session carry that history to its
// harness (ContinuedByTranscript). Runs of the lost box stay readable
// from the new environment's RunEvents at the same cursors. A turn the
// loss interrupted is not run again: the Replacement offers it.
//
// A box the vendor still has is refused with ErrNotLost (a box it ended
// at its deadline is gone too, and its sessions continue the same way);
// without a replica no history can be had, and Replace fails before it
// makes a box. A new box whose history cannot be recorded is destroyed.
func (e *Environment) Replace(ctx context.Context, o ReplaceOptions) (*Environment, *Replacement, error) {
	const op = "environment.Replace"
	if !e.wasLost() {
		reason := gone(ctx, e.box)
		switch {
		case reason == "":
			return nil, nil, fmt.Errorf("%s: box %s: %w", op, e.box.ID(), ErrNotLost)
		case pastDeadline(e.ref):
			// Its deadline ended it: no loss, but its sessions go on.
			e.mu.Lock()
			e.lost = true
			e.mu.Unlock()
		default:
			e.noteLost(ctx, reason)
		}
	}
	if o.Request == nil && e.req != nil {
		r := *e.req
		o.Request = &r
	}
	e.mu.Lock()
	ref := e.ref
	e.mu.Unlock()
	next, rep, err := e.p.replace(ctx, ref, o)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	return next, rep, nil
}

// Replace is Environment.Replace for a box known by its reference alone
// (one another process made, whose box is gone, so that it cannot be
// connected to): the box must be one the vendor no longer has.
func (p *Provider) Replace(ctx context.Context, ref Reference, o ReplaceOptions) (*Environment, *Replacement, error) {
	const op = "sandbox.Replace"
	if ref.Vendor != p.o.Vendor.Name() || ref.BoxID == "" {
		return nil, nil, fmt.Errorf("%s: the reference is not of a %s box", op, p.o.Vendor.Name())
	}
	box, err := p.o.Vendor.Connect(ctx, ref.BoxID)
	reason := ""
	switch _, nf := errors.AsType[*vendors.NotFoundError](err); {
	case nf:
		reason = "the vendor no longer has the box"
	case err != nil:
		return nil, nil, fmt.Errorf("%s: box %s: %w", op, ref.BoxID, err)
	default:
		reason = gone(ctx, box)
	}
	if reason == "" {
		return nil, nil, fmt.Errorf("%s: box %s: %w", op, ref.BoxID, ErrNotLost)
	}
	if !pastDeadline(ref) {
		p.o.Logger.Warn("box lost", "box", ref.BoxID, "reason", reason)
		p.emit(Event{Type: EventLost, BoxID: ref.BoxID, RunTag: ref.RunTag, Reason: reason})
	}
	p.revokeModel(context.WithoutCancel(ctx), ref.BoxID)
	next, rep, err := p.replace(ctx, ref, o)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	return next, rep, nil
}

// gone is why the vendor no longer has box, "" while it has it (or
// cannot say).
func gone(ctx context.Context, box vendors.Box) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lostBoxTimeout)
	defer cancel()
	if _, err := box.Status(ctx); err != nil {
		if _, nf := errors.AsType[*vendors.NotFoundError](err); nf {
			return "the vendor no longer has the box"
		}
	}
	return ""
}

// pastDeadline reports whether ref's box is within tokenMargin of its
// deadline or past it: a box gone then ended at its deadline, not lost.
func pastDeadline(ref Reference) bool {
	return !ref.Deadline.IsZero() && time.Now().After(ref.Deadline.Add(-tokenMargin))
}

// replace continues the sessions of the lost box ref names on a new box.
func (p *Provider) replace(ctx context.Context, ref Reference, o ReplaceOptions) (*Environment, *Replacement, error) {
	rd, ok := p.o.Broker.(broker.ReplicaReader)
	if !ok {
		return nil, nil, broker.ErrNoReplica
	}
	sessions, interrupted, kept, err := p.histories(ctx, rd, ref.BoxID, "")
	if err != nil {
		return nil, nil, err
	}
	req := CreateRequest{Profile: ref.Profile, Env: ref.Env, Metadata: ref.Metadata}
	if o.Request != nil {
		req = *o.Request
	}
	create := o.Create
	if create == nil {
		create = p.Create
	}
	next, err := create(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("new box: %w", err)
	}
	to := next.box.ID()
	fail := func(err error) (*Environment, *Replacement, error) {
		if derr := next.Destroy(context.WithoutCancel(ctx)); derr != nil {
			return nil, nil, errors.Join(err, derr)
		}
		return nil, nil, err
	}
	// The lost box's policy as last set holds on the new box too.
	if pol := ref.Egress; pol != nil && !pol.Open && !reflect.DeepEqual(pol, next.ref.Egress) {
		if err := next.SetEgress(ctx, *pol); err != nil {
			return fail(fmt.Errorf("the lost box's egress policy on box %s: %w", to, err))
		}
	}
	// The new box lists the turns it continues, with the boxes that ran
	// them: a later loss of it carries them on, and a later process
	// rebuilds its sessions' history from them (Reference.Continues).
	for _, t := range kept {
		if err := rd.NoteReplicaTurn(ctx, to, t); err != nil {
			return fail(fmt.Errorf("record the history on box %s: %w", to, err))
		}
	}
	next.mu.Lock()
	next.history = sessions
	next.ref.Continues = append([]string{ref.BoxID}, ref.Continues...)
	next.mu.Unlock()
	rep := &Replacement{From: ref.BoxID, To: to, Interrupted: interrupted}
	for _, id := range slices.Sorted(maps.Keys(sessions)) {
		n := 0
		for _, m := range sessions[id] {
			if m.Role == "user" {
				n++
			}
		}
		rep.Sessions = append(rep.Sessions, ContinuedSession{ID: id, Turns: n, Method: ContinuedByTranscript})
	}
	p.emit(Event{Type: EventReplaced, BoxID: to, RunTag: next.ref.RunTag, Reason: "box_lost",
		Detail: fmt.Sprintf("continues lost box %s: %d sessions by %s, %d turns interrupted", ref.BoxID, len(rep.Sessions), ContinuedByTranscript, len(interrupted))})
	return next, rep, nil
}

// histories reads box's turns from the replica, but those run on box
// skip: each session's history (the prompt and the answer of each turn
// whose run ended), the turns whose runs did not end, and the turn
// records a new box keeps.
func (p *Provider) histories(ctx context.Context, rd broker.ReplicaReader, box, skip string) (map[string][]wire.Message, []InterruptedTurn, []replica.Turn, error) {
	turns, err := rd.ReplicaTurns(ctx, box)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the replica's turns of box %s: %w", box, err)
	}
	sessions := map[string][]wire.Message{}
	var interrupted []InterruptedTurn
	var kept []replica.Turn
	// The bridge runs one turn at a time: only the box's newest turn can
	// have been cut short. An older turn whose run the replica does not
	// hold (dropped by its bounds, or unreadable) travels with its prompt
	// alone.
	newest := -1
	for i, t := range turns {
		if t.RunBox == box {
			newest = i
		}
	}
	for i, t := range turns {
		if t.RunBox == skip {
			continue
		}
		answer, ended := p.answer(ctx, rd, t)
		if !ended && i == newest {
			interrupted = append(interrupted, InterruptedTurn{RunID: t.Run, SessionID: t.SessionID, TurnID: t.TurnID, ExecutionID: t.ExecutionID, Prompt: t.Prompt})
			continue
		}
		sessions[t.SessionID] = append(sessions[t.SessionID], wire.Message{Role: "user", Content: wire.MustJSON(t.Prompt)})
		if answer != "" {
			sessions[t.SessionID] = append(sessions[t.SessionID], wire.Message{Role: "assistant", Content: wire.MustJSON(answer)})
		}
		kept = append(kept, t)
	}
	for id, h := range sessions {
		sessions[id] = boundHistory(h, maxHistoryBytes)
	}
	return sessions, interrupted, kept, nil
}

// maxHistoryBytes bounds the history a continued session's turns carry:
// the newest turns within it (a model's context is the real bound; a
// history past it would fail every turn of the session).
const maxHistoryBytes = 256 << 10

// answer is the text of turn t's run as the replica holds it, and
// whether the run ended there (not cut short by a loss). A run it cannot
// read has no answer, and did not end.
func (p *Provider) answer(ctx context.Context, rd broker.ReplicaReader, t replica.Turn) (string, bool) {
	stored, found, err := replicaStored(ctx, rd, t.RunBox, t.Run)
	if err != nil || !found {
		if err != nil {
			p.o.Logger.Warn("replica: a run's events not read for its session's history", "box", t.RunBox, "run", t.Run, "err", err)
		}
		return "", false
	}
	ref := boundRef(provider.ControlRef{RunID: t.Run, SessionID: t.SessionID, ExecutionID: or(t.ExecutionID, t.Run), Provider: "boxctl", EnvironmentID: t.RunBox}, stored)
	var text strings.Builder
	final, shutdown := "", false
	ended, err := provider.DecodeStored(ref, t.TurnID, 0, stored, func(ev provider.Event) bool {
		switch {
		case ev.Type == provider.EventResult:
			final = ev.FinalText
		case shutdownEnd(ev):
			// A box stopped gracefully (a pod deleted, a container
			// stopped): its bridge ended the live run on the way out, which
			// is the loss cutting the turn short, not the turn's own end.
			shutdown = true
		default:
			text.WriteString(ev.Delta)
		}
		return true
	})
	if shutdown {
		ended = false
	}
	if err != nil {
		// Data the box wrote that neither format reads: no answer.
		p.o.Logger.Warn("replica: a run's events not read for its session's history", "box", t.RunBox, "run", t.Run, "err", err)
		return "", false
	}
	if final != "" {
		return final, ended
	}
	return text.String(), ended
}

// shutdownEnd reports whether ev ends a run its bridge stopped as it shut
// down (wire.TypeBridgeShutdown): a retained turn's status says so, a
// plain turn's error chunk names the type.
func shutdownEnd(ev provider.Event) bool {
	if ev.Type != provider.EventStatus || ev.Status != provider.StatusFailed {
		return false
	}
	if strings.HasPrefix(ev.Detail, wire.TypeBridgeShutdown+":") {
		return true
	}
	var chunk struct {
		Error *struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	return json.Unmarshal(ev.Raw, &chunk) == nil && chunk.Error != nil && chunk.Error.Type == wire.TypeBridgeShutdown
}

// boundRef is ref with the provider, environment and execution the run's
// interaction events bind to: the names of the environment that started
// the run, which a provider continuing its box does not know. Only the
// run's text is read with it.
func boundRef(ref provider.ControlRef, stored []provider.StoredEvent) provider.ControlRef {
	for _, s := range stored {
		var env struct {
			Event struct {
				Type    string                   `json:"type"`
				Request *wire.InteractionRequest `json:"request"`
			} `json:"event"`
		}
		if json.Unmarshal(s.Data, &env) != nil || env.Event.Type != provider.EventInteraction || env.Event.Request == nil {
			continue
		}
		if b := env.Event.Request.Binding; b.RunID == ref.RunID && b.SessionID == ref.SessionID {
			ref.Provider, ref.EnvironmentID, ref.ExecutionID = b.Provider, b.EnvironmentID, b.ExecutionID
		}
		return ref
	}
	return ref
}

// replicaStored reads what the replica holds of box's run; found is
// false when it holds nothing of it.
func replicaStored(ctx context.Context, rd broker.ReplicaReader, box, run string) (stored []provider.StoredEvent, found bool, err error) {
	for next := int64(0); ; {
		evs, err := rd.ReplicaEvents(ctx, box, run, next, 1000)
		if errors.Is(err, replica.ErrNotFound) || errors.Is(err, broker.ErrUnknownBox) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		for _, ev := range evs {
			stored = append(stored, provider.StoredEvent{Seq: ev.Seq, Data: ev.Data})
		}
		if len(evs) < 1000 {
			return stored, true, nil
		}
		if len(stored) >= maxReplicaEvents {
			return nil, false, fmt.Errorf("the replica holds more than %d events of run %s: not read", maxReplicaEvents, run)
		}
		next = evs[len(evs)-1].Seq
	}
}

// boundHistory keeps the newest messages of h within wire's bounds and
// max bytes of content, starting on a user message: a session longer
// than a turn may carry loses its oldest turns.
func boundHistory(h []wire.Message, max int) []wire.Message {
	size := 0
	for _, m := range h {
		size += len(m.Content)
	}
	for len(h) > 0 && (size > max || wire.CheckHistory(h) != nil || h[0].Role != "user") {
		size -= len(h[0].Content)
		h = h[1:]
	}
	return h
}

// withHistory is turn with the history of its session when the session
// continues a lost box's (Replace), loaded from the replica once for an
// environment from Connect. Every turn of the session carries it, so that
// a turn's request is the same each time it is sent; the bridge gives it
// to the harness only while the harness holds none of the session.
func (e *Environment) withHistory(ctx context.Context, turn provider.Turn) (provider.Turn, error) {
	if turn.SessionID == "" || turn.History != nil {
		return turn, nil
	}
	e.mu.Lock()
	h, loaded := e.history, e.history != nil || len(e.ref.Continues) == 0
	e.mu.Unlock()
	if !loaded {
		// The box's own turns are no history: its harness holds them.
		sessions := map[string][]wire.Message{}
		rd, ok := e.p.o.Broker.(broker.ReplicaReader)
		if ok {
			var err error
			if sessions, _, _, err = e.p.histories(ctx, rd, e.box.ID(), e.box.ID()); err != nil {
				return turn, fmt.Errorf("environment: the history of the sessions the box continues: %w", err)
			}
		} else {
			e.p.o.Logger.Warn("the box continues a lost box, but no replica is at hand: its sessions' turns go without their history",
				"box", e.box.ID(), "continues", e.ref.Continues[0])
		}
		e.mu.Lock()
		if e.history == nil {
			e.history = sessions
		}
		h = e.history
		e.mu.Unlock()
	}
	turn.History = h[turn.SessionID]
	return turn, nil
}

// noteTurnTimeout bounds recording a turn in the replica.
const noteTurnTimeout = 5 * time.Second

// noteTurn records a turn this environment started in the replica: its
// prompt, beside the events the box ships.
func (e *Environment) noteTurn(ctx context.Context, turn provider.Turn, ref provider.ControlRef) {
	rd, ok := e.p.o.Broker.(broker.ReplicaReader)
	if !ok || ref.RunID == "" {
		return
	}
	prompt := turn.Prompt
	if len(turn.Parts) > 0 {
		var texts []string
		for _, p := range turn.Parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		prompt = strings.Join(texts, "\n\n")
	}
	t := replica.Turn{Run: ref.RunID, SessionID: ref.SessionID, TurnID: or(turn.TurnID, ref.ExecutionID), ExecutionID: ref.ExecutionID, Prompt: prompt}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noteTurnTimeout)
	defer cancel()
	if err := rd.NoteReplicaTurn(nctx, e.box.ID(), t); err != nil && !errors.Is(err, broker.ErrNoReplica) && !errors.Is(err, broker.ErrUnknownBox) {
		e.p.o.Logger.Warn("replica: a turn not recorded", "box", e.box.ID(), "run", ref.RunID, "err", err)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Successor returns the environment that continues this one's lost box
// (Options.AutoReplace), nil while there is none. Turns sent to this
// environment go there, and so do Reference, RunEvents (which reads this
// box's runs too), Close and Destroy; Box and the run and session
// controls of provider.Environment stay this lost box's: take them from
// the successor.
func (e *Environment) Successor() *Environment {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.successor
}

// continued returns the environment a turn goes to instead of this one:
// its successor, made now when the box was found lost, the provider
// replaces lost boxes by itself (Options.AutoReplace) and replace allows
// it; nil: this one.
func (e *Environment) continued(ctx context.Context, replace bool) (next *Environment, made bool, err error) {
	e.mu.Lock()
	next, lost, closed := e.successor, e.lost, e.closed
	e.mu.Unlock()
	if next != nil || !lost || !e.p.o.AutoReplace {
		return next, false, nil
	}
	if closed || !replace {
		return nil, false, &LostError{BoxID: e.box.ID(), Reason: "found lost before", Err: errors.New("the box is gone")}
	}
	e.mu.Lock()
	taken := e.busy
	if !taken {
		e.busy = true // one replacement at a time
	}
	e.mu.Unlock()
	if taken {
		return nil, false, busy("environment.Replace")
	}
	defer e.release()
	if next := e.Successor(); next != nil {
		return next, false, nil
	}
	next, rep, err := e.Replace(ctx, ReplaceOptions{})
	if err != nil {
		return nil, false, &LostError{BoxID: e.box.ID(), Reason: "found lost before", Err: fmt.Errorf("replace it: %w", err)}
	}
	e.p.o.Logger.Info("lost box replaced", "box", rep.From, "by", rep.To, "sessions", len(rep.Sessions), "interrupted", len(rep.Interrupted))
	e.mu.Lock()
	closed = e.closed
	if !closed {
		e.successor = next
	}
	e.mu.Unlock()
	if closed {
		// Closed or destroyed meanwhile: the new box is nobody's.
		err := next.Destroy(context.WithoutCancel(ctx))
		return nil, false, errors.Join(&LostError{BoxID: e.box.ID(), Reason: "found lost before", Err: errors.New("the environment was closed")}, err)
	}
	return next, true, nil
}

// foundGone reports whether, with Options.AutoReplace, the box is found
// gone before a turn is sent to it (the vendor is asked each time): the
// turn then goes to the box that continues it, never having been sent
// here.
func (e *Environment) foundGone(ctx context.Context) bool {
	if !e.p.o.AutoReplace || e.wasLost() {
		return false
	}
	reason := gone(ctx, e.box)
	if reason == "" {
		return false
	}
	if pastDeadline(e.Reference()) {
		e.mu.Lock()
		e.lost = true
		e.mu.Unlock()
	} else {
		e.noteLost(ctx, reason)
	}
	return true
}
