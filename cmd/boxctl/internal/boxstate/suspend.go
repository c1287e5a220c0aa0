package boxstate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
)

// Suspend suspends the box of rec at a turn boundary (`boxctl suspend`):
// its environment is reconnected from the record's reference, suspended,
// and the record keeps the reference without its bearer, which no longer
// opens anything, and the retention as its deadline.
func (s *Store) Suspend(ctx context.Context, v vendors.Vendor, rec *Record, log *slog.Logger) (sandbox.SuspendedRef, error) {
	if rec.Reference == nil {
		return sandbox.SuspendedRef{}, fmt.Errorf("box %s: the state holds no reference to it", ShortID(rec.ID))
	}
	gate, err := s.gate(ctx, v, rec)
	if err != nil {
		return sandbox.SuspendedRef{}, err
	}
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: rec.Image, Logger: log, OnEvent: s.Record, EgressGate: gate})
	if err != nil {
		return sandbox.SuspendedRef{}, err
	}
	env, err := p.Connect(ctx, s.reference(rec))
	if err != nil {
		return sandbox.SuspendedRef{}, err
	}
	ref, err := env.Suspend(ctx, sandbox.SuspendOptions{})
	if err != nil {
		_ = env.Close(context.WithoutCancel(ctx))
		return ref, err
	}
	return ref, s.setReference(ctx, rec.ID, ref.Reference)
}

// ModelAccess is how a box reaches its model: through a broker (Broker,
// BrokerURL, Upstream) or, for a box made without one, the Router.
type ModelAccess struct {
	Broker    broker.Granter
	BrokerURL string
	// BrokerCA are the PEM certificates the box trusts for BrokerURL.
	BrokerCA []byte
	Upstream string
	Router   sandbox.Router
}

// AccessFunc finds the model access of rec's box on v.
type AccessFunc func(ctx context.Context, v vendors.Vendor, rec *Record) (ModelAccess, error)

// RouterAccess is the access of a box made without a broker: the Router
// the environment names (sandbox.RouterFromEnv, through getenv).
func RouterAccess(getenv func(string) string) AccessFunc {
	return func(context.Context, vendors.Vendor, *Record) (ModelAccess, error) {
		router, err := sandbox.RouterFromEnv("", getenv)
		return ModelAccess{Router: router}, err
	}
}

// Resume starts the suspended box of rec again with a fresh bearer and
// model access (a new box token at the broker, or the Router) (`boxctl
// resume`), and records its new reference.
func (s *Store) Resume(ctx context.Context, v vendors.Vendor, rec *Record, access ModelAccess, log *slog.Logger) (sandbox.Reference, error) {
	if rec.Reference == nil {
		return sandbox.Reference{}, fmt.Errorf("box %s: the state holds no reference to it", ShortID(rec.ID))
	}
	gate, err := s.gate(ctx, v, rec)
	if err != nil {
		return sandbox.Reference{}, err
	}
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: rec.Image, Router: access.Router, Broker: access.Broker,
		BrokerURL: access.BrokerURL, BrokerCA: access.BrokerCA, Upstream: access.Upstream, Logger: log, OnEvent: s.Record,
		EgressGate: gate})
	if err != nil {
		return sandbox.Reference{}, err
	}
	env, err := p.Resume(ctx, sandbox.SuspendedRef{Reference: s.reference(rec)})
	if err != nil {
		return sandbox.Reference{}, err
	}
	ref := env.Reference()
	_ = env.Close(context.WithoutCancel(ctx))
	return ref, s.setReference(ctx, rec.ID, ref)
}

// setReference replaces the reference and deadline of box id's record.
func (s *Store) setReference(ctx context.Context, id string, ref sandbox.Reference) error {
	return s.Update(ctx, func(st *State) error {
		r := st.Find(id)
		if r == nil {
			return fmt.Errorf("box %s is no longer in the state", ShortID(id))
		}
		r.Reference, r.Deadline = &ref, ref.Deadline
		return nil
	})
}

// VendorOpener opens the vendor of a target; the returned func closes it.
type VendorOpener func(target string) (vendors.Vendor, func(), error)

// SuspendArg suspends the box arg names in the state (an id, a unique
// prefix, or "last"), on the vendor open opens, and returns its id.
func (s *Store) SuspendArg(ctx context.Context, arg string, open VendorOpener, log *slog.Logger) (string, error) {
	return s.onRecord(arg, open, func(v vendors.Vendor, rec *Record) error {
		_, err := s.Suspend(ctx, v, rec, log)
		return err
	})
}

// ResumeArg resumes the box arg names in the state, as SuspendArg finds
// it, with the model access access finds, and returns its id.
func (s *Store) ResumeArg(ctx context.Context, arg string, open VendorOpener, access AccessFunc, log *slog.Logger) (string, error) {
	return s.onRecord(arg, open, func(v vendors.Vendor, rec *Record) error {
		ma, err := access(ctx, v, rec)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		_, err = s.Resume(ctx, v, rec, ma, log)
		return err
	})
}

// Action is a change of a box's run: Suspend or Resume.
type Action int

// Actions.
const (
	Suspend Action = iota + 1
	Resume
)

// String is the action's past tense, the state it leaves the box in.
func (a Action) String() string {
	if a == Suspend {
		return "suspended"
	}
	return "resumed"
}

// Apply suspends or resumes the box arg names in the state openState
// opens; a resume's model access is the one access finds.
func Apply(ctx context.Context, openState func() (*Store, error), act Action, arg string, open VendorOpener, access AccessFunc, log *slog.Logger) (string, error) {
	s, err := openState()
	if err != nil {
		return "", err
	}
	if act == Suspend {
		return s.SuspendArg(ctx, arg, open, log)
	}
	return s.ResumeArg(ctx, arg, open, access, log)
}

func (s *Store) onRecord(arg string, open VendorOpener, fn func(vendors.Vendor, *Record) error) (string, error) {
	st, err := s.Load()
	if err != nil {
		return "", err
	}
	rec, err := st.Resolve(arg)
	if err != nil {
		return "", err
	}
	v, closeVendor, err := open(rec.Target)
	if err != nil {
		return "", err
	}
	defer closeVendor()
	return rec.ID, fn(v, rec)
}

// gate is the gate of rec's box when it is confined (Options.Gates).
func (s *Store) gate(ctx context.Context, v vendors.Vendor, rec *Record) (sandbox.EgressGate, error) {
	if rec.Egress == nil || rec.Egress.Open || s.gates == nil {
		return nil, nil
	}
	return s.gates(ctx, v, rec)
}

// reference is rec's reference with the box's policy as the state last
// recorded it (boxctl net changes it).
func (s *Store) reference(rec *Record) sandbox.Reference {
	ref := *rec.Reference
	if rec.Egress != nil {
		p := *rec.Egress
		ref.Egress = &p
	}
	return ref
}
