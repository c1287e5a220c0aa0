package main

import (
	"fmt"
	"slices"
	"strings"
)

// minPrefix is the shortest box id prefix a <box> argument may be.
const minPrefix = 4

// lastBox is the <box> argument naming the most recently created box.
const lastBox = "last"

// resolveBox finds the box arg names in the state: its id, a unique prefix
// of at least minPrefix characters, or "last". Boxes still being created
// are not named.
func (st *boxState) resolveBox(arg string) (*boxRecord, error) {
	if arg == lastBox {
		var last *boxRecord
		for i := range st.Boxes {
			r := &st.Boxes[i]
			if !r.pending() && (last == nil || r.Created.After(last.Created)) {
				last = r
			}
		}
		if last == nil {
			return nil, usageErrorf("no box to call last: `boxctl up` one first")
		}
		return last, nil
	}
	ids := make([]string, 0, len(st.Boxes))
	for _, r := range st.Boxes {
		if !r.pending() {
			ids = append(ids, r.ID)
		}
	}
	id, err := matchID(arg, ids)
	if err != nil {
		return nil, err
	}
	return st.find(id), nil
}

// noBoxError is a <box> argument that names no box in the state.
type noBoxError struct{ arg string }

func (e *noBoxError) Error() string {
	return fmt.Sprintf("no box %q in the state (boxctl ls lists them)", e.arg)
}

// matchID returns the one of ids that arg is or starts.
func matchID(arg string, ids []string) (string, error) {
	if arg == "" {
		return "", usageErrorf("empty box id")
	}
	if slices.Contains(ids, arg) {
		return arg, nil
	}
	if len(arg) < minPrefix {
		return "", usageErrorf("box %q: give at least %d characters of its id, the whole id, or %q", arg, minPrefix, lastBox)
	}
	var found []string
	for _, id := range ids {
		if strings.HasPrefix(id, arg) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", &noBoxError{arg: arg}
	case 1:
		return found[0], nil
	}
	short := make([]string, len(found))
	for i, id := range found {
		short[i] = shortID(id)
	}
	return "", usageErrorf("box %q is ambiguous: it starts %s", arg, strings.Join(short, ", "))
}

// shortID is the 12-character form of a box id that listings print.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
