package boxstate

import (
	"context"
	"errors"

	"github.com/tangle-network/boxctl/vendors"
)

// Opener opens the vendor of a target (vendors/open.Set.Opener).
type Opener func(target string) (vendors.Vendor, error)

// Locate finds the box arg names on the vendor of its record, or of
// target for a box the state does not know (see ResolveVendor); rec is
// nil for such a box.
func (st *State) Locate(ctx context.Context, open Opener, target, arg string) (v vendors.Vendor, id string, rec *Record, err error) {
	if r, err := st.Resolve(arg); err == nil && r.Target != "" {
		target = r.Target
	}
	if v, err = open(target); err != nil {
		return nil, "", nil, err
	}
	id, rec, err = st.ResolveVendor(ctx, v, arg)
	if err != nil {
		return nil, "", nil, err
	}
	return v, id, rec, nil
}

// RemovedBox is one box RemoveArgs destroyed.
type RemovedBox struct {
	ID string `json:"id"`
	Removed
}

// RemoveArgs destroys and forgets each box an argument names (Locate,
// then Remove), going on past a failure: it returns the boxes it
// destroyed and every failure joined.
func (s *Store) RemoveArgs(ctx context.Context, st *State, open Opener, target string, args []string) ([]RemovedBox, error) {
	var (
		done []RemovedBox
		errs []error
	)
	for _, arg := range args {
		v, id, rec, err := st.Locate(ctx, open, target, arg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		removed, err := s.Remove(ctx, v, id, rec)
		if err != nil {
			errs = append(errs, err)
		}
		if removed.Destroyed {
			s.log.Debug("box removed", "box", ShortID(id))
			done = append(done, RemovedBox{ID: id, Removed: removed})
		}
	}
	return done, errors.Join(errs...)
}

// LastImage is the image of the last build for buildTarget (a boximage
// target), or an *ArgError saying how to name or build one.
func (st *State) LastImage(buildTarget string) (string, error) {
	if st.LastBuild == nil || st.LastBuild.Target != buildTarget {
		return "", argErrorf("no box image: pass --image REF, or build one with `boxctl build --target %s`", buildTarget)
	}
	return st.LastBuild.Image, nil
}
