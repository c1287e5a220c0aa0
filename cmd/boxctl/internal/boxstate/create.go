package boxstate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// CreateFunc makes the box of run tag runTag and returns its reference.
type CreateFunc func(ctx context.Context, runTag string) (sandbox.Reference, error)

// Create records rec (a box that does not exist yet, known by its
// RunTag) in the state, then calls create, then records the box's id,
// reference and deadline. The record goes in first so that a Collect
// meanwhile keeps the box. When create fails, or the box cannot be
// recorded (the box is then destroyed on v), the record is forgotten and
// its local model endpoint stopped, and the error returns.
func (s *Store) Create(ctx context.Context, v vendors.Vendor, rec Record, create CreateFunc) (Record, error) {
	if err := s.Update(ctx, func(st *State) error { st.Boxes = append(st.Boxes, rec); return nil }); err != nil {
		s.stopRouter(rec)
		return Record{}, err
	}
	ref, err := create(ctx, rec.RunTag)
	if err == nil {
		rec.ID, rec.Reference = ref.BoxID, &ref
		if !ref.Deadline.IsZero() {
			rec.Deadline = ref.Deadline.UTC()
		}
		err = s.Update(ctx, func(st *State) error {
			if r := st.FindRunTag(rec.RunTag); r != nil {
				*r = rec
			} else {
				st.Boxes = append(st.Boxes, rec)
			}
			return nil
		})
		if err != nil {
			err = errors.Join(fmt.Errorf("record box %s: %w", ShortID(ref.BoxID), err), Destroy(ctx, v, ref.BoxID))
		}
	}
	if err != nil {
		s.stopRouter(rec)
		if ferr := s.Update(context.WithoutCancel(ctx), func(st *State) error {
			st.Remove(func(r *Record) bool { return r.RunTag == rec.RunTag })
			return nil
		}); ferr != nil {
			s.log.Warn("could not forget the failed box in the state", "run", rec.RunTag, "err", ferr)
		}
		return Record{}, err
	}
	return rec, nil
}

// Forget removes the record of box id, stopping its local model
// endpoint; it reports whether the endpoint was running.
func (s *Store) Forget(ctx context.Context, rec *Record) (routerStopped bool, err error) {
	routerStopped = rec.Router.Running()
	s.stopRouter(*rec)
	err = s.Update(context.WithoutCancel(ctx), func(st *State) error {
		st.Remove(func(r *Record) bool { return r.ID == rec.ID })
		return nil
	})
	return routerStopped, err
}

// Removed is what Remove did besides destroying the box.
type Removed struct {
	// Destroyed reports that the box is gone (the error of a Remove that
	// did not destroy it says why).
	Destroyed bool `json:"-"`
	// Forgotten reports that the state named the box and no longer does.
	Forgotten bool `json:"forgotten"`
	// RouterStopped reports that its local model endpoint was stopped.
	RouterStopped bool `json:"routerStopped,omitempty"`
}

// Remove destroys box id on v at its user's request, records its
// destroyed event and forgets rec, the box's record (nil when the state
// does not know the box). An error after the destroy says that the box is
// gone but its record stays.
func (s *Store) Remove(ctx context.Context, v vendors.Vendor, id string, rec *Record) (Removed, error) {
	forget := s.forgetAtGate(ctx, v, id, rec)
	if err := Destroy(ctx, v, id); err != nil {
		return Removed{}, err
	}
	forget()
	ev := sandbox.Event{Type: sandbox.EventDestroyed, Vendor: v.Name(), BoxID: id, Reason: sandbox.ReasonUser}
	if rec == nil {
		s.Record(ev)
		return Removed{Destroyed: true}, nil
	}
	ev.RunTag = rec.RunTag
	s.Record(ev)
	stopped, err := s.Forget(ctx, rec)
	r := Removed{Destroyed: true, Forgotten: err == nil, RouterStopped: stopped}
	if err != nil {
		return r, fmt.Errorf("box %s removed, but not forgotten: %w", ShortID(id), err)
	}
	return r, nil
}

// forgetAtGate returns what forgets a confined box's address at the gate
// that holds its policy, once the box is gone: that address may be the
// next box's. Where there is nothing to forget, or the address cannot be
// read, it does nothing (a warning says why).
func (s *Store) forgetAtGate(ctx context.Context, v vendors.Vendor, id string, rec *Record) func() {
	if rec == nil {
		return func() {}
	}
	gate, err := s.gate(ctx, v, rec)
	if err != nil || gate == nil {
		if err != nil {
			s.log.Warn("egress: the box's gate", "box", ShortID(id), "err", err)
		}
		return func() {}
	}
	var addr netip.Addr
	b, err := v.Connect(ctx, id)
	if err == nil {
		if a, ok := b.(vendors.Addressed); ok {
			addr, err = a.Address(ctx)
		}
	}
	if err != nil {
		s.log.Warn("egress: the box's address", "box", ShortID(id), "err", err)
	}
	return func() {
		if !addr.IsValid() {
			return
		}
		if err := gate.Remove(context.WithoutCancel(ctx), addr); err != nil {
			s.log.Warn("egress: forget the box at its gate", "box", ShortID(id), "err", err)
		}
	}
}

// stopRouter stops the record's local model endpoint, if it has one, and
// logs a failure.
func (s *Store) stopRouter(rec Record) {
	if err := rec.Router.StopAndClean(); err != nil {
		s.log.Warn("local model endpoint not stopped", "pid", rec.Router.PID, "err", err)
	}
}

// Destroy removes box id from v, on a context Ctrl-C does not end, with
// its own deadline. A box already gone is not an error.
func Destroy(ctx context.Context, v vendors.Vendor, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sandbox.DefaultDestroyTimeout)
	defer cancel()
	b, err := v.Connect(ctx, id)
	if errors.Is(err, vendors.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy box %s: %w", ShortID(id), err)
	}
	if err := b.Destroy(ctx); err != nil {
		return fmt.Errorf("destroy box %s: %w", ShortID(id), err)
	}
	return nil
}
