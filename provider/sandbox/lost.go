package sandbox

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
	"github.com/tangle-network/boxctl/vendors"
)

// EventLost: the box vanished under a live environment (the vendor
// deleted it, or anyone but this environment; its node died): Reason says
// what the vendor reported. Distinct from EventDestroyed, which a destroy by the user, a
// deadline or gc causes.
const EventLost EventType = "lost"

// DetailBoxLost is the detail of the terminal status event a stream of a
// lost box's run ends on, when the run had not ended before the loss: the
// run was interrupted, and may be run again (under its own turn id).
const DetailBoxLost = "interrupted: box_lost"

// LostError is an operation on a box that is gone: the vendor no longer
// has it, with no destroy of this environment's.
type LostError struct {
	BoxID  string
	Reason string
	// Err is the failure that revealed it.
	Err error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("box %s was lost (%s): %v", e.BoxID, e.Reason, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// maxReplicaEvents bounds the events of a run read from the replica (its
// data comes from the box).
const maxReplicaEvents = 200000

// lostBoxTimeout bounds asking the vendor whether the box is gone.
const lostBoxTimeout = 10 * time.Second

// lostReason asks the vendor whether the box is gone: the reason when it
// is, "" when it is there (running, stopping, suspending: the vendor's
// own moves), when the vendor cannot say, when this environment is being
// closed or destroyed, or near the box's deadline (a deadline ends a box;
// clocks differ by tokenMargin).
func (e *Environment) lostReason(ctx context.Context) string {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed || pastDeadline(e.ref) {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lostBoxTimeout)
	defer cancel()
	_, err := e.box.Status(ctx)
	if _, gone := errors.AsType[*vendors.NotFoundError](err); gone {
		return "the vendor no longer has the box"
	}
	return ""
}

// wasLost reports whether the box was found lost.
func (e *Environment) wasLost() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lost
}

// noteLost records the loss once: the lifecycle event, and the box's
// token retired at the broker.
func (e *Environment) noteLost(ctx context.Context, reason string) {
	e.mu.Lock()
	first := !e.lost
	e.lost = true
	e.mu.Unlock()
	if !first {
		return
	}
	e.p.o.Logger.Warn("box lost", "box", e.box.ID(), "reason", reason)
	e.p.emit(Event{Type: EventLost, BoxID: e.box.ID(), RunTag: e.ref.RunTag, Reason: reason})
	e.p.revokeModel(context.WithoutCancel(ctx), e.box.ID())
}

// replicaRest yields what the broker's replica holds of box's run ref (of
// turn turnID) after sequence after, then the run's end: its own, or a
// terminal status saying the box was lost (DetailBoxLost). ok is false
// when there is no replica to read (the caller keeps its error).
func (e *Environment) replicaRest(ctx context.Context, box string, ref provider.ControlRef, turnID string, after int64, reason string, yield func(provider.Event, error) bool) (ok bool) {
	rd, has := e.p.o.Broker.(broker.ReplicaReader)
	if !has || ref.RunID == "" {
		return false
	}
	// A run the replica holds nothing of was lost before it shipped any.
	stored, _, err := replicaStored(ctx, rd, box, ref.RunID)
	if errors.Is(err, broker.ErrNoReplica) {
		return false
	}
	if err != nil {
		e.p.o.Logger.Warn("replica: the lost box's run not read", "box", box, "run", ref.RunID, "err", err)
		yield(provider.Event{}, &LostError{BoxID: box, Reason: reason, Err: err})
		return true
	}
	stopped := false
	ended, err := provider.DecodeStored(ref, turnID, after, stored, func(ev provider.Event) bool {
		if !yield(ev, nil) {
			stopped = true
			return false
		}
		return true
	})
	switch {
	case stopped, ended:
	case err != nil:
		yield(provider.Event{}, &LostError{BoxID: box, Reason: reason, Err: err})
	default:
		yield(provider.Event{Type: provider.EventStatus, Status: provider.StatusFailed, Detail: DetailBoxLost + ": " + reason,
			RunID: ref.RunID, SessionID: ref.SessionID, ExecutionID: ref.ExecutionID}, nil)
	}
	return true
}

// RunEvents yields the events of run runID of this box after sequence
// number after (0: all), to the run's end: from the box's bridge while it
// runs, and once the box is lost from the broker's replica, ending then
// on the run's own end or on a failed status saying the box was lost
// (DetailBoxLost). A box lost with no replica to read is a *LostError.
// A run of a lost box this one continues (Replace) is read from the
// replica the same way, at the same cursors.
func (e *Environment) RunEvents(ctx context.Context, runID string, after int64) iter.Seq2[provider.Event, error] {
	if next := e.Successor(); next != nil && !e.ranHere(ctx, runID) {
		return next.RunEvents(ctx, runID, after) // the successor's run
	}
	return func(yield func(provider.Event, error) bool) {
		ref := provider.ControlRef{RunID: runID, SessionID: runID, ExecutionID: runID, Provider: e.pv.Name(), EnvironmentID: e.ID()}
		last := after
		s, err := e.Run(ctx, runID)
		if err == nil {
			if cr, ok := s.ControlRef(); ok {
				ref = cr
			}
			for ev, err := range s.Events(ctx, strconv.FormatInt(after, 10)) {
				if err == nil {
					if n := ev.Frame(); n > last {
						last = n
					}
					if !yield(ev, nil) {
						return
					}
					continue
				}
				if ctx.Err() != nil {
					yield(provider.Event{}, err)
					return
				}
				e.lostRest(ctx, ref, last, err, yield)
				return
			}
			return
		}
		if ctx.Err() != nil {
			yield(provider.Event{}, err)
			return
		}
		if box, pref, ok := e.priorRun(ctx, ref); ok {
			// A run of a lost box this one continues: the replica's.
			e.replicaRest(ctx, box, pref, pref.ExecutionID, after, "box "+box+" was lost", yield)
			return
		}
		e.lostRest(ctx, e.replicaRef(ctx, e.box.ID(), ref), last, err, yield)
	}
}

// priorRun finds run ref among the runs of the lost boxes this box
// continues (Reference.Continues): the box, and ref with the session the
// replica recorded.
func (e *Environment) priorRun(ctx context.Context, ref provider.ControlRef) (string, provider.ControlRef, bool) {
	rd, ok := e.p.o.Broker.(broker.ReplicaReader)
	if !ok {
		return "", ref, false
	}
	for _, box := range e.ref.Continues {
		runs, err := rd.ReplicaRuns(ctx, box)
		if err != nil {
			continue
		}
		for _, r := range runs {
			if r.ID == ref.RunID {
				if r.SessionID != "" {
					ref.SessionID = r.SessionID
				}
				return box, ref, true
			}
		}
	}
	return "", ref, false
}

// lostRest ends a read of run ref that failed with err after sequence
// after: from the replica when the box is lost, else with err.
func (e *Environment) lostRest(ctx context.Context, ref provider.ControlRef, after int64, err error, yield func(provider.Event, error) bool) {
	reason := e.lostReason(ctx)
	if reason == "" {
		yield(provider.Event{}, err)
		return
	}
	e.noteLost(ctx, reason)
	if !e.replicaRest(ctx, e.box.ID(), ref, ref.ExecutionID, after, reason, yield) {
		yield(provider.Event{}, &LostError{BoxID: e.box.ID(), Reason: reason, Err: err})
	}
}

// replicaRef is ref with the session the replica recorded for box's run.
func (e *Environment) replicaRef(ctx context.Context, box string, ref provider.ControlRef) provider.ControlRef {
	rd, ok := e.p.o.Broker.(broker.ReplicaReader)
	if !ok {
		return ref
	}
	runs, err := rd.ReplicaRuns(ctx, box)
	if err != nil {
		return ref
	}
	for _, r := range runs {
		if r.ID == ref.RunID && r.SessionID != "" {
			ref.SessionID = r.SessionID
		}
	}
	return ref
}

// ranHere reports whether run runID ran on this environment's box, as
// far as the replica knows: a run of the lost box is read from its
// replica, even where its successor ran the same turn again under the
// same id.
func (e *Environment) ranHere(ctx context.Context, runID string) bool {
	rd, ok := e.p.o.Broker.(broker.ReplicaReader)
	if !ok {
		return false
	}
	runs, err := rd.ReplicaRuns(ctx, e.box.ID())
	if err == nil && slices.ContainsFunc(runs, func(r wire.ReplicaRun) bool { return r.ID == runID }) {
		return true
	}
	turns, err := rd.ReplicaTurns(ctx, e.box.ID())
	return err == nil && slices.ContainsFunc(turns, func(t replica.Turn) bool { return t.Run == runID && t.RunBox == e.box.ID() })
}
