package boxstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// ConnectOptions tune Connect.
type ConnectOptions struct {
	// Interactive is sandbox.Options.Interactive: turns whose permission
	// prompts reach the caller. Default: one-shot turns.
	Interactive bool
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
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: rec.Image, Logger: s.log, OnEvent: s.Record, Interactive: o.Interactive})
	if err != nil {
		return nil, err
	}
	env, err := p.Connect(ctx, *rec.Reference)
	if errors.Is(err, vendors.ErrNotFound) {
		return nil, fmt.Errorf("box %s is gone (past its deadline, or removed): `boxctl gc` forgets it: %w", ShortID(rec.ID), err)
	}
	return env, err
}
