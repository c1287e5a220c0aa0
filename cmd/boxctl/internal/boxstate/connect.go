package boxstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// ConnectOptions tune Connect.
type ConnectOptions struct {
	// Interactive is sandbox.Options.Interactive: turns whose permission
	// prompts reach the caller. Default: one-shot turns.
	Interactive bool
	// Access, when set, is the box's model access: its broker records the
	// turns' prompts in its replica and serves a lost box's events.
	Access *ModelAccess
}

// Connect drives the box of rec again from its reference, on v (the
// vendor of rec.Target), recording the box's lifecycle events in this
// state's event log. A box the vendor no longer has is an error wrapping
// vendors.ErrNotFound that says how to forget it. The caller closes the
// environment.
func (s *Store) Connect(ctx context.Context, v vendors.Vendor, rec *Record, o ConnectOptions) (*sandbox.Environment, error) {
	if rec.Reference == nil {
		return nil, fmt.Errorf("box %s: the state holds no reference to it", ShortID(rec.ID))
	}
	so := sandbox.Options{Vendor: v, Image: rec.Image, Logger: s.log, OnEvent: s.Record, Interactive: o.Interactive}
	if a := o.Access; a != nil {
		so.Broker, so.BrokerURL, so.BrokerCA, so.Upstream = a.Broker, a.BrokerURL, a.BrokerCA, a.Upstream
	}
	p, err := sandbox.New(so)
	if err != nil {
		return nil, err
	}
	env, err := p.Connect(ctx, *rec.Reference)
	if errors.Is(err, vendors.ErrNotFound) {
		return nil, fmt.Errorf("box %s is gone (past its deadline, or removed): `boxctl gc` forgets it: %w", ShortID(rec.ID), err)
	}
	return env, err
}

// Replace continues the sessions of rec's lost box on a new box of the
// same target, image, upstream and egress policy, through access (which
// must name the broker whose replica holds the lost box's turns), and
// records the new box in the lost one's place: the local model endpoint
// moves with it. The caller closes the returned environment.
func (s *Store) Replace(ctx context.Context, v vendors.Vendor, rec *Record, access ModelAccess) (Record, *sandbox.Environment, *sandbox.Replacement, error) {
	if rec.Reference == nil {
		return Record{}, nil, nil, fmt.Errorf("box %s: the state holds no reference to it", ShortID(rec.ID))
	}
	gate, err := s.gate(ctx, v, rec)
	if err != nil {
		return Record{}, nil, nil, err
	}
	now := time.Now()
	life := rec.Deadline.Sub(rec.Created)
	if life <= 0 {
		life = sandbox.DefaultLifetime
	}
	next := Record{Target: rec.Target, Image: rec.Image, RunTag: sandbox.NewRunTag(), Created: now.UTC(), Deadline: now.Add(life).UTC(),
		Upstream: rec.Upstream, BrokerURL: rec.BrokerURL, BrokerCA: rec.BrokerCA, Webhooks: rec.Webhooks, Egress: rec.Egress}
	var (
		env *sandbox.Environment
		rep *sandbox.Replacement
	)
	ref := *rec.Reference
	next, err = s.Create(ctx, v, next, func(ctx context.Context, tag string) (sandbox.Reference, error) {
		p, err := sandbox.New(sandbox.Options{Vendor: v, Image: rec.Image, Broker: access.Broker, BrokerURL: access.BrokerURL,
			BrokerCA: access.BrokerCA, Upstream: access.Upstream, Lifetime: life, RunTag: tag, Owner: s.owner, Logger: s.log,
			OnEvent: s.Record, Egress: rec.Egress, EgressGate: gate})
		if err != nil {
			return sandbox.Reference{}, err
		}
		req := sandbox.CreateRequest{Profile: ref.Profile, Env: ref.Env, Metadata: ref.Metadata, Lifetime: life}
		if env, rep, err = p.Replace(ctx, ref, sandbox.ReplaceOptions{Request: &req}); err != nil {
			return sandbox.Reference{}, err
		}
		return env.Reference(), nil
	})
	if err != nil {
		if env != nil { // made, then not recorded: Create destroyed its box
			_ = env.Close(context.WithoutCancel(ctx))
		}
		return Record{}, nil, nil, err
	}
	// The lost box's record goes; its local model endpoint serves the new
	// box, whose record takes it.
	next.Router = rec.Router
	err = s.Update(context.WithoutCancel(ctx), func(st *State) error {
		st.Remove(func(r *Record) bool { return r.ID == rec.ID })
		if r := st.Find(next.ID); r != nil {
			r.Router = rec.Router
		}
		return nil
	})
	if err != nil {
		_ = env.Close(context.WithoutCancel(ctx))
		return Record{}, nil, nil, fmt.Errorf("box %s replaces lost box %s, but the state was not updated: %w", ShortID(next.ID), ShortID(rec.ID), err)
	}
	return next, env, rep, nil
}
