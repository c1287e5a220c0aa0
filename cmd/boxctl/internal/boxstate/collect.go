package boxstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// Entry is a box Collect removed, or a record it forgot.
type Entry struct {
	ID     string `json:"id"`
	RunTag string `json:"runTag,omitempty"`
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// Collected is what Collect did (with DryRun: would do).
type Collected struct {
	DryRun bool `json:"dryRun"`
	// Removed are the boxes destroyed (with DryRun: to destroy).
	Removed []Entry `json:"removed"`
	// Forgotten are the state's records of boxes that are gone.
	Forgotten []Entry `json:"forgotten"`
	// Suspended are the boxes suspended because their bridge was idle
	// past their threshold (sandbox.SuspendIdle; with DryRun: to
	// suspend).
	Suspended []Entry `json:"suspended"`
}

// Err joins the errors of the boxes Collect could not remove or suspend.
func (c Collected) Err() error {
	var errs []error
	for _, r := range c.Removed {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("box %s not removed: %s", ShortID(r.ID), r.Error))
		}
	}
	for _, r := range c.Suspended {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("box %s not suspended: %s", ShortID(r.ID), r.Error))
		}
	}
	return errors.Join(errs...)
}

// Reasons a record is forgotten.
const (
	ReasonBoxGone     = "its box is gone"
	ReasonNeverCreate = "its `boxctl up` never finished, and its lifetime is over"
)

// Collect reaps the vendor's boxes (reaper.Reap: past their deadline,
// owner gone, or owned by this state and not in it), then forgets the
// state's records of target whose boxes are gone, or whose create never
// finished within its lifetime, and stops their local model endpoints.
// It works under the state's lock, so that a Create meanwhile cannot
// record a box this Collect judged unknown; with dryRun it reads the
// state without the lock and changes nothing. Each box it destroyed has
// its destroyed event recorded (Record). Then it suspends the boxes idle
// past their threshold (sandbox.SuspendIdle), and records each as
// `boxctl suspend` does (Suspend).
func (s *Store) Collect(ctx context.Context, v vendors.Vendor, target string, dryRun bool) (Collected, error) {
	var (
		res  Collected
		stop []*localrouter.Process
	)
	collect := func(st *State) error {
		var err error
		res, stop, err = s.collect(ctx, v, st, target, dryRun)
		return err
	}
	// The records as they were, for the webhooks of the boxes removed.
	before, err := s.Load()
	if err != nil {
		return Collected{}, err
	}
	if dryRun {
		var st *State
		if st, err = s.Load(); err == nil {
			err = collect(st)
		}
	} else {
		err = s.Update(ctx, collect)
	}
	if err != nil {
		return Collected{}, err
	}
	for _, r := range stop {
		s.stopRouter(Record{Router: r})
	}
	if !dryRun {
		for _, r := range res.Removed {
			if r.Error == "" {
				s.record(before, sandbox.GCEvent(v.Name(), r.ID, r.RunTag, r.Reason))
			}
		}
	}
	res.Suspended, err = s.suspendIdle(ctx, v, dryRun)
	return res, err
}

// suspendIdle is Collect's idle suspend: outside the state's lock (each
// suspend takes a while), then each suspended box's record keeps its
// reference without the bearer and its retention as deadline.
func (s *Store) suspendIdle(ctx context.Context, v vendors.Vendor, dryRun bool) ([]Entry, error) {
	idle, err := sandbox.SuspendIdle(ctx, v, sandbox.IdleOptions{DryRun: dryRun, OnEvent: s.Record, Logger: s.log})
	if err != nil {
		return []Entry{}, err
	}
	out := make([]Entry, 0, len(idle))
	done := map[string]vendors.SuspendInfo{}
	for _, r := range idle {
		e := Entry{ID: r.Box.ID, RunTag: r.Box.RunTag(), Reason: fmt.Sprintf("idle for %v (its threshold %v)", r.Idle.Truncate(time.Second), r.After)}
		if r.Err != nil {
			e.Error = r.Err.Error()
		} else if !dryRun {
			done[r.Box.ID] = r.Suspended
		}
		out = append(out, e)
	}
	if len(done) == 0 {
		return out, nil
	}
	return out, s.Update(ctx, func(st *State) error {
		for id, info := range done {
			if r := st.Find(id); r != nil && r.Reference != nil {
				ref := sandbox.NewSuspendedRef(*r.Reference, info).Reference
				r.Reference, r.Deadline = &ref, ref.Deadline
			}
		}
		return nil
	})
}

func (s *Store) collect(ctx context.Context, v vendors.Vendor, st *State, target string, dryRun bool) (Collected, []*localrouter.Process, error) {
	res := Collected{DryRun: dryRun, Removed: []Entry{}, Forgotten: []Entry{}}
	known := func(b vendors.Info) bool {
		if b.Owner() != s.owner {
			return true // another user's state: not this one's to judge
		}
		return st.Find(b.ID) != nil || (b.RunTag() != "" && st.FindRunTag(b.RunTag()) != nil)
	}
	reaped, err := reaper.Reap(ctx, v, reaper.Options{DryRun: dryRun, Known: known})
	if err != nil {
		return res, nil, err
	}
	removed := map[string]bool{}
	for _, r := range reaped {
		e := Entry{ID: r.Box.ID, RunTag: r.Box.RunTag(), Reason: r.Reason}
		if r.Err != nil {
			e.Error = r.Err.Error()
		} else {
			removed[r.Box.ID] = true
		}
		res.Removed = append(res.Removed, e)
	}
	infos, err := v.List(ctx, nil)
	if err != nil {
		return res, nil, err
	}
	// A box reaped (with dryRun: to reap) counts as gone.
	live := map[string]bool{}
	for _, b := range infos {
		live[b.ID] = !removed[b.ID]
	}
	now := time.Now()
	forget := func(r *Record) string {
		switch {
		case r.Target != target:
			return ""
		case r.Pending():
			if now.After(r.Deadline) {
				return ReasonNeverCreate
			}
		case !live[r.ID]:
			return ReasonBoxGone
		}
		return ""
	}
	var stop []*localrouter.Process
	drop := func(r *Record) bool {
		reason := forget(r)
		if reason == "" {
			return false
		}
		res.Forgotten = append(res.Forgotten, Entry{ID: r.ID, RunTag: r.RunTag, Reason: reason})
		if r.Router != nil {
			stop = append(stop, r.Router)
		}
		return true
	}
	if dryRun {
		for i := range st.Boxes {
			drop(&st.Boxes[i])
		}
		return res, nil, nil
	}
	st.Remove(drop)
	return res, stop, nil
}

// CollectEvery runs Collect and hands its result to report, then again
// every period until ctx ends (`boxctl gc --every`); a period of 0 runs
// it once. Run once, its error (Collect's, report's, or a box's:
// Collected.Err) is returned; with a period, each round's error is logged
// and the rounds go on, and the end of ctx ends them with nil.
func (s *Store) CollectEvery(ctx context.Context, v vendors.Vendor, target string, dryRun bool, period time.Duration, report func(Collected) error) error {
	for {
		res, err := s.Collect(ctx, v, target, dryRun)
		if err == nil {
			err = errors.Join(report(res), res.Err())
		}
		switch {
		case period <= 0:
			return err
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Warn("gc round failed; the next one runs as planned", "err", err, "next", period)
		}
		t := time.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
