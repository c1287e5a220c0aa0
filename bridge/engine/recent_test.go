package engine

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func frames(from, to int) [][]byte {
	var out [][]byte
	for i := from; i <= to; i++ {
		out = append(out, []byte("f"+strconv.Itoa(i)))
	}
	return out
}

// TestRecentFrames holds the in-memory tail of a run's committed frames
// to the suffix the store keeps: a reader it cannot serve (before its
// first frame, at its end, after a gap or a reset) is sent to the store.
func TestRecentFrames(t *testing.T) {
	type add struct {
		last   int64
		frames [][]byte
	}
	for _, tc := range []struct {
		name               string
		maxEvents, maxByte int
		adds               []add
		reset              bool
		after              int64
		maxBytes           int
		wantFirst          int64
		want               [][]byte
		wantOK             bool
	}{
		{name: "all", maxEvents: 100, maxByte: 1 << 20, adds: []add{{3, frames(1, 3)}, {5, frames(4, 5)}},
			after: 0, maxBytes: 1 << 20, wantFirst: 1, want: frames(1, 5), wantOK: true},
		{name: "from the middle", maxEvents: 100, maxByte: 1 << 20, adds: []add{{3, frames(1, 3)}, {5, frames(4, 5)}},
			after: 2, maxBytes: 1 << 20, wantFirst: 3, want: frames(3, 5), wantOK: true},
		{name: "page bound, at least one", maxEvents: 100, maxByte: 1 << 20, adds: []add{{5, frames(1, 5)}},
			after: 1, maxBytes: 1, wantFirst: 2, want: frames(2, 2), wantOK: true},
		{name: "page bound", maxEvents: 100, maxByte: 1 << 20, adds: []add{{5, frames(1, 5)}},
			after: 0, maxBytes: 4, wantFirst: 1, want: frames(1, 2), wantOK: true},
		{name: "nothing newer", maxEvents: 100, maxByte: 1 << 20, adds: []add{{5, frames(1, 5)}}, after: 5, maxBytes: 100},
		{name: "event bound drops the oldest", maxEvents: 3, maxByte: 1 << 20, adds: []add{{3, frames(1, 3)}, {5, frames(4, 5)}},
			after: 1, maxBytes: 100},
		{name: "event bound keeps the newest", maxEvents: 3, maxByte: 1 << 20, adds: []add{{3, frames(1, 3)}, {5, frames(4, 5)}},
			after: 2, maxBytes: 100, wantFirst: 3, want: frames(3, 5), wantOK: true},
		{name: "byte bound", maxEvents: 100, maxByte: 4, adds: []add{{5, frames(1, 5)}},
			after: 3, maxBytes: 100, wantFirst: 4, want: frames(4, 5), wantOK: true},
		{name: "gap starts over", maxEvents: 100, maxByte: 1 << 20, adds: []add{{3, frames(1, 3)}, {7, frames(6, 7)}},
			after: 3, maxBytes: 100},
		{name: "after a gap", maxEvents: 100, maxByte: 1 << 20, adds: []add{{3, frames(1, 3)}, {7, frames(6, 7)}},
			after: 5, maxBytes: 100, wantFirst: 6, want: frames(6, 7), wantOK: true},
		{name: "reset", maxEvents: 100, maxByte: 1 << 20, adds: []add{{3, frames(1, 3)}}, reset: true, after: 0, maxBytes: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recentFrames{maxEvents: tc.maxEvents, maxBytes: tc.maxByte}
			for _, a := range tc.adds {
				r.add(a.last, a.frames)
			}
			if tc.reset {
				r.reset()
			}
			first, got, ok := r.after(tc.after, tc.maxBytes)
			if ok != tc.wantOK || first != tc.wantFirst || !cmp.Equal(got, tc.want) {
				t.Errorf("after(%d) = %d, %q, %v; want %d, %q, %v", tc.after, first, got, ok, tc.wantFirst, tc.want, tc.wantOK)
			}
		})
	}
}
