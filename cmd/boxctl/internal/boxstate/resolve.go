package boxstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/vendors"
)

// MinPrefix is the shortest box id prefix a box argument may be.
const MinPrefix = 4

// Last is the box argument naming the most recently created box.
const Last = "last"

// ArgError is a box argument that cannot name a box: empty, too short a
// prefix, ambiguous, or "last" with no box. A command reports it as a
// mistake in how it was called.
type ArgError struct{ msg string }

func (e *ArgError) Error() string { return e.msg }

func argErrorf(format string, args ...any) error { return &ArgError{msg: fmt.Sprintf(format, args...)} }

// NoBoxError is a box argument that names no box in the state.
type NoBoxError struct{ Arg string }

func (e *NoBoxError) Error() string {
	return fmt.Sprintf("no box %q in the state (boxctl ls lists them)", e.Arg)
}

// Resolve finds the box arg names in the state: its id, a unique prefix
// of at least MinPrefix characters, or Last. Boxes still being created
// are not named. The error is an *ArgError or a *NoBoxError.
func (st *State) Resolve(arg string) (*Record, error) {
	if arg == Last {
		var last *Record
		for i := range st.Boxes {
			r := &st.Boxes[i]
			if !r.Pending() && (last == nil || r.Created.After(last.Created)) {
				last = r
			}
		}
		if last == nil {
			return nil, argErrorf("no box to call last: `boxctl up` one first")
		}
		return last, nil
	}
	ids := make([]string, 0, len(st.Boxes))
	for _, r := range st.Boxes {
		if !r.Pending() {
			ids = append(ids, r.ID)
		}
	}
	id, err := MatchID(arg, ids)
	if err != nil {
		return nil, err
	}
	return st.Find(id), nil
}

// MatchID returns the one of ids that arg is or starts. The error is an
// *ArgError or a *NoBoxError.
func MatchID(arg string, ids []string) (string, error) {
	if arg == "" {
		return "", argErrorf("empty box id")
	}
	if slices.Contains(ids, arg) {
		return arg, nil
	}
	if len(arg) < MinPrefix {
		return "", argErrorf("box %q: give at least %d characters of its id, the whole id, or %q", arg, MinPrefix, Last)
	}
	var found []string
	for _, id := range ids {
		if strings.HasPrefix(id, arg) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", &NoBoxError{Arg: arg}
	case 1:
		return found[0], nil
	}
	short := make([]string, len(found))
	for i, id := range found {
		short[i] = ShortID(id)
	}
	return "", argErrorf("box %q is ambiguous: it starts %s", arg, strings.Join(short, ", "))
}

// ShortID is the 12-character form of a box id that listings print.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ResolveVendor finds the box arg names: in the state (see Resolve), else
// among the vendor's boxes by id or unique prefix, for a box the state
// does not know (rec is then nil).
func (st *State) ResolveVendor(ctx context.Context, v vendors.Vendor, arg string) (id string, rec *Record, err error) {
	rec, err = st.Resolve(arg)
	if err == nil {
		return rec.ID, rec, nil
	}
	var nb *NoBoxError
	if !errors.As(err, &nb) {
		return "", nil, err
	}
	infos, lerr := v.List(ctx, nil)
	if lerr != nil {
		return "", nil, lerr
	}
	ids := make([]string, len(infos))
	for i, b := range infos {
		ids[i] = b.ID
	}
	if id, merr := MatchID(arg, ids); merr == nil {
		return id, nil, nil
	}
	return "", nil, fmt.Errorf("no box %q in the state nor on %s (boxctl ls lists them)", arg, v.Name())
}
