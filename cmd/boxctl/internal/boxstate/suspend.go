package boxstate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tangle-network/boxctl/provider/sandbox"
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
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: rec.Image, Logger: log, OnEvent: s.Record})
	if err != nil {
		return sandbox.SuspendedRef{}, err
	}
	env, err := p.Connect(ctx, *rec.Reference)
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

// Resume starts the suspended box of rec again with a fresh bearer and
// model Router router (`boxctl resume`), and records its new reference.
func (s *Store) Resume(ctx context.Context, v vendors.Vendor, rec *Record, router sandbox.Router, log *slog.Logger) (sandbox.Reference, error) {
	if rec.Reference == nil {
		return sandbox.Reference{}, fmt.Errorf("box %s: the state holds no reference to it", ShortID(rec.ID))
	}
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: rec.Image, Router: router, Logger: log, OnEvent: s.Record})
	if err != nil {
		return sandbox.Reference{}, err
	}
	env, err := p.Resume(ctx, sandbox.SuspendedRef{Reference: *rec.Reference})
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
// it, and returns its id.
func (s *Store) ResumeArg(ctx context.Context, arg string, open VendorOpener, router sandbox.Router, log *slog.Logger) (string, error) {
	return s.onRecord(arg, open, func(v vendors.Vendor, rec *Record) error {
		_, err := s.Resume(ctx, v, rec, router, log)
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
// opens; a resume's model Router is the one the environment names
// (sandbox.RouterFromEnv, through getenv).
func Apply(ctx context.Context, openState func() (*Store, error), act Action, arg string, open VendorOpener, getenv func(string) string, log *slog.Logger) (string, error) {
	s, err := openState()
	if err != nil {
		return "", err
	}
	if act == Suspend {
		return s.SuspendArg(ctx, arg, open, log)
	}
	router, err := sandbox.RouterFromEnv("", getenv)
	if err != nil {
		return "", fmt.Errorf("resume: %w", err)
	}
	return s.ResumeArg(ctx, arg, open, router, log)
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
