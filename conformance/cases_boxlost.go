package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
)

// FaultBoxLost deletes the box from under a live environment (the
// vendor's own delete: a container removed, an emulator's sandbox or a
// pod deleted), in a turn or between turns.
const FaultBoxLost = "box_lost"

// boxLostCase is chaos.box_lost: each fault is a box of its own, deleted
// through the vendor (not through the environment) at a random point of a
// paced turn, or between two turns, after a first turn of the session
// that carries a marker. A reader of the turn gets every event the
// replica outside the box holds, none twice, and ends on the run's end or
// on a status saying the box was lost; a turn after a loss between turns
// is a *sandbox.LostError. Then the session continues on a new box
// (Environment.Replace): the local model endpoint must get the first
// turn's marker as history with the session's next turn (the interrupted
// one, run again by the caller twice under its own ids, which must reach
// the model once; or a new one), and no turn may reach it more often than
// it was sent.
func boxLostCase(c *caseCtx) error {
	if c.local() == nil {
		return skip("local", "the chaos family paces its turns with the local model endpoint")
	}
	rd, ok := c.r.t.Broker.(broker.ReplicaReader)
	if !ok {
		return skip("replica", "the target's broker keeps no replica of the boxes' events")
	}
	p, err := c.sandbox(nil)
	if err != nil {
		return err
	}
	st := &ChaosStats{Kind: FaultBoxLost}
	c.setChaos(st)
	between, unreplicated := 0, 0
	for i := range max(c.r.o.Chaos.Faults, 1) {
		env, err := c.create(p, c.createRequest())
		if err != nil {
			return err
		}
		s := lostSession{id: "lost-" + randID(), mark: "[history " + randID() + "]", tag: "(" + randID() + ")"}
		evs, _, err := c.stream(c.ctx, env, provider.Turn{Prompt: "Remember " + s.mark + ".", SessionID: s.id})
		if err != nil {
			return failErr(c.step("the first turn of session %s in box %s", s.id, env.Box().ID()), "its events", err)
		}
		st.Runs++
		// The turn's end outside the box before the loss: a reader has it
		// once the replica does (or after the bridge's 200 ms bound), and
		// the session's history is built from the replica.
		if err := c.replicated(rd, env.Box().ID(), evs[0].RunID); err != nil {
			return err
		}
		if i%2 == 1 {
			between++
			if err := c.lostBetweenTurns(env, s, st); err != nil {
				return err
			}
		} else if err := c.lostInTurn(env, rd, &s, st, 1+rand.IntN(chaosTurnDeltas/2), &unreplicated); err != nil {
			return err
		}
		if err := c.continueSession(p, env, s, st); err != nil {
			return err
		}
	}
	st.finish()
	c.note("box_lost: %d boxes lost (%d between turns), %d runs, %d replica events checked, %d lost, %d duplicated, %d unfinished; %d events read live but not replicated before the loss; %d sessions continued on a new box with their history (%d without), %d interrupted turns run again, %d turns run twice",
		st.Faults, between, st.Runs, st.Events, st.Lost, st.Duplicated, st.Unfinished, unreplicated, st.Continued, st.NoHistory, st.Interrupted, st.RunTwice)
	if !st.clean() {
		return failf(c.step("%d boxes lost", st.Faults), "every replicated event read once, every run ended, every session continued with its history, no turn run twice",
			"%d lost, %d duplicated, %d unfinished, %d sessions without their history, %d turns run twice", st.Lost, st.Duplicated, st.Unfinished, st.NoHistory, st.RunTwice)
	}
	return nil
}

// lostSession is the session of one fault of chaos.box_lost: its id, the
// marker of its first turn, the tag of the turn the loss cut, and whether
// the loss cut it (its reader ended on DetailBoxLost).
type lostSession struct {
	id, mark, tag string
	cut           bool
}

// cutPrompt is the paced turn a loss cuts.
func (s lostSession) cutPrompt() string { return chaosPrompt(0) + " " + s.tag }

// continueSession replaces env's lost box and continues s there: the
// interrupted turn run again (twice, as a retrying caller would), or a
// new turn; the model must get s's history with it, and every turn as
// often as it ran.
func (c *caseCtx) continueSession(p *sandbox.Provider, env *sandbox.Environment, s lostSession, st *ChaosStats) error {
	desc := c.step("session %s continued from lost box %s", s.id, env.Box().ID())
	next, rep, err := env.Replace(c.ctx, sandbox.ReplaceOptions{Create: func(ctx context.Context, req sandbox.CreateRequest) (*sandbox.Environment, error) {
		n, err := p.Create(ctx, req)
		if err == nil {
			c.mu.Lock()
			c.boxes = append(c.boxes, n.Reference().BoxID)
			c.mu.Unlock()
		}
		return n, err
	}})
	if err != nil {
		return failErr(desc, "a new box with the session", err)
	}
	defer func() { _ = next.Destroy(context.WithoutCancel(c.ctx)) }()
	if !slices.ContainsFunc(rep.Sessions, func(cs sandbox.ContinuedSession) bool { return cs.ID == s.id && cs.Turns >= 1 }) {
		return failf(desc, "the session among those continued", "%+v", rep.Sessions)
	}
	local := c.local()
	var turn provider.Turn
	var want []string
	switch {
	case len(rep.Interrupted) > 1 || (s.cut && len(rep.Interrupted) == 0):
		return failf(desc, "the cut turn interrupted, alone", "%+v (the loss cut a turn: %v)", rep.Interrupted, s.cut)
	case len(rep.Interrupted) == 1:
		in := rep.Interrupted[0]
		if in.SessionID != s.id || in.Prompt != s.cutPrompt() {
			return failf(desc, "the cut turn offered", "%+v", in)
		}
		st.Interrupted++
		turn, want = in.Turn(), []string{s.tag}
	default:
		// Lost between turns, or the cut run ended before the loss.
		tag := "(" + randID() + ")"
		turn, want = provider.Turn{Prompt: "Go on " + tag, SessionID: s.id}, []string{tag}
	}
	sends := 1
	if len(rep.Interrupted) == 1 {
		sends = 2 // a caller that retries: one run
	}
	var runID string
	for range sends {
		evs, _, err := c.stream(c.ctx, next, turn)
		if err != nil {
			return failErr(desc, "the session's next turn on the new box", err)
		}
		if len(evs) > 0 {
			if runID != "" && evs[0].RunID != runID {
				st.RunTwice++
			}
			runID = evs[0].RunID
		}
	}
	// The history is the first turn's prompt and its answer.
	if local.modelCallsWith(append(want, s.mark, "assistant: "+ReplyText)) == 0 {
		st.NoHistory++
	} else {
		st.Continued++
	}
	// The first turn reached the model once as a turn (and after that as
	// history only); the continued one once on the new box.
	if n := local.modelCallsWith([]string{s.mark}, "<previous_conversation>"); n != 1 {
		st.RunTwice++
	}
	sent := 1
	if len(rep.Interrupted) == 1 {
		sent = 2 // on the lost box, then on the new one
	}
	if n := local.modelCallsWith(want); n != sent {
		st.RunTwice++
	}
	return nil
}

// replicated waits until the replica holds the end of box's run.
func (c *caseCtx) replicated(rd broker.ReplicaReader, box, run string) error {
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		runs, err := rd.ReplicaRuns(ctx, box)
		if err == nil && slices.ContainsFunc(runs, func(r wire.ReplicaRun) bool { return r.ID == run && r.Status != "running" }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return failErr(c.step("run %s of box %s in the replica", run, box), "its end held outside the box", errors.Join(err, ctx.Err()))
		case <-tick.C:
		}
	}
}

// randID is a short random id.
func randID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// deleteUnder deletes env's box through its vendor, behind the
// environment's back.
func (c *caseCtx) deleteUnder(env *sandbox.Environment) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 2*time.Minute)
	defer cancel()
	if err := env.Box().Destroy(ctx); err != nil {
		return failErr(c.step("the vendor's delete of box %s", env.Box().ID()), "the box gone", err)
	}
	return nil
}

// lostInTurn streams a paced turn in env and deletes its box after the
// reader got parts text parts.
func (c *caseCtx) lostInTurn(env *sandbox.Environment, rd broker.ReplicaReader, s *lostSession, st *ChaosStats, parts int, unreplicated *int) error {
	desc := c.step("a turn in box %s deleted after %d text parts", env.Box().ID(), parts)
	seen := map[string]bool{}
	frames := map[int64]bool{}
	var (
		runID string
		last  *provider.Event
		n     int
		del   error
		// atDelete is the last stored event the reader had when the box
		// was deleted: the replica must hold it too, or a new reader
		// would miss it.
		atDelete, maxSeq int64
	)
	for ev, err := range env.Stream(c.ctx, provider.Turn{Prompt: s.cutPrompt(), SessionID: s.id}) {
		if err != nil {
			return failErr(desc, "the run's events, then its end", err)
		}
		if ev.RunID != "" {
			runID = ev.RunID
		}
		if ev.ID != "" {
			if seen[ev.ID] {
				st.Duplicated++
			}
			seen[ev.ID] = true
			seq := ev.Frame()
			frames[seq] = true
			maxSeq = max(maxSeq, seq)
		}
		if ev.Type == provider.EventMessagePart && ev.Delta != "" {
			if n++; n == parts && del == nil {
				atDelete = maxSeq
				del = c.deleteUnder(env)
				st.Faults++
			}
		}
		last = &ev
	}
	if del != nil {
		return del
	}
	st.Runs++
	// The run ends on the loss, or on its own end when it was stored whole
	// before the delete took effect; never on another failure.
	if last == nil || !terminalEvent(*last) ||
		(last.Status == provider.StatusFailed && !strings.HasPrefix(last.Detail, sandbox.DetailBoxLost)) {
		st.Unfinished++
	}
	s.cut = last != nil && strings.HasPrefix(last.Detail, sandbox.DetailBoxLost)
	held, err := rd.ReplicaEvents(c.ctx, env.Box().ID(), runID, 0, 10000)
	if errors.Is(err, replica.ErrNotFound) {
		held, err = nil, nil // lost before the replica had any of it
	}
	if err != nil {
		return failErr(c.step("the replica's events of run %s", runID), "the run's events", err)
	}
	st.Events += len(held)
	for _, h := range held {
		if !frames[h.Seq] {
			st.Lost++
		}
	}
	if len(held) == 0 || held[len(held)-1].Seq < atDelete {
		var have int64
		if len(held) > 0 {
			have = held[len(held)-1].Seq
		}
		// Read live but never replicated: a new reader would miss them.
		// The bridge gives readers only what the replica holds, up to a
		// 200 ms bound a loaded machine can pass: counted apart.
		*unreplicated += int(atDelete - have)
	}
	if n < parts {
		return failf(desc, "the box deleted mid-turn", "the turn streamed %d text parts, fewer than %d", n, parts)
	}
	return nil
}

// lostBetweenTurns deletes env's box after a turn of s, and expects the
// next turn to say the box was lost.
func (c *caseCtx) lostBetweenTurns(env *sandbox.Environment, s lostSession, st *ChaosStats) error {
	if err := c.deleteUnder(env); err != nil {
		return err
	}
	st.Faults++
	desc := c.step("a turn in box %s after its vendor deleted it", env.Box().ID())
	for _, err := range env.Stream(c.ctx, provider.Turn{Prompt: "After the loss.", SessionID: s.id}) {
		if _, lost := errors.AsType[*sandbox.LostError](err); lost {
			return nil
		}
		if err != nil {
			return failErr(desc, "a *sandbox.LostError", err)
		}
	}
	return failf(desc, "a *sandbox.LostError", "the turn ran")
}
