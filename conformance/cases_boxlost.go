package conformance

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

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
// paced turn, or between two turns. A reader of the turn gets every event
// the replica outside the box holds, none twice, and ends on the run's
// end or on a status saying the box was lost; a turn after a loss between
// turns is a *sandbox.LostError.
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
		if i%2 == 1 {
			between++
			if err := c.lostBetweenTurns(env, st); err != nil {
				return err
			}
			continue
		}
		if err := c.lostInTurn(env, rd, st, 1+rand.IntN(chaosTurnDeltas/2), &unreplicated); err != nil {
			return err
		}
	}
	st.finish()
	c.note("box_lost: %d boxes lost (%d between turns), %d runs, %d replica events checked, %d lost, %d duplicated, %d unfinished; %d events read live but not replicated before the loss",
		st.Faults, between, st.Runs, st.Events, st.Lost, st.Duplicated, st.Unfinished, unreplicated)
	if !st.clean() {
		return failf(c.step("%d boxes lost", st.Faults), "every replicated event read once, every run ended",
			"%d lost, %d duplicated, %d unfinished", st.Lost, st.Duplicated, st.Unfinished)
	}
	return nil
}

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
func (c *caseCtx) lostInTurn(env *sandbox.Environment, rd broker.ReplicaReader, st *ChaosStats, parts int, unreplicated *int) error {
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
	for ev, err := range env.Stream(c.ctx, provider.Turn{Prompt: chaosPrompt(0)}) {
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
		// The window is the shipper's lag (milliseconds); counted apart.
		*unreplicated += int(atDelete - have)
	}
	if n < parts {
		return failf(desc, "the box deleted mid-turn", "the turn streamed %d text parts, fewer than %d", n, parts)
	}
	return nil
}

// lostBetweenTurns runs a turn in env, deletes its box, and expects the
// next turn to say the box was lost.
func (c *caseCtx) lostBetweenTurns(env *sandbox.Environment, st *ChaosStats) error {
	if _, _, err := c.stream(c.ctx, env, provider.Turn{Prompt: "Before the loss."}); err != nil {
		return failErr(c.step("a turn in box %s", env.Box().ID()), "its events", err)
	}
	st.Runs++
	if err := c.deleteUnder(env); err != nil {
		return err
	}
	st.Faults++
	desc := c.step("a turn in box %s after its vendor deleted it", env.Box().ID())
	for _, err := range env.Stream(c.ctx, provider.Turn{Prompt: "After the loss."}) {
		if _, lost := errors.AsType[*sandbox.LostError](err); lost {
			return nil
		}
		if err != nil {
			return failErr(desc, "a *sandbox.LostError", err)
		}
	}
	return failf(desc, "a *sandbox.LostError", "the turn ran")
}
