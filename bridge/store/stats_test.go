package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStore_Stats(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir(), Options{})
	for _, id := range []string{"r1", "r2", "r3"} {
		if _, _, err := s.CreateRun(ctx, Run{ID: id, Digest: "sha256:" + id, Harness: "claude-code", Model: "sonnet"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, "r1", events(5, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, "r1", Finish{Status: StatusDone}, events(2, "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, "r2", Finish{Status: StatusCancelled}, nil); err != nil {
		t.Fatal(err)
	}
	// A refused append counts nothing.
	if _, err := s.Append(ctx, "r2", events(3, "c")); err == nil {
		t.Fatal("Append to a finished run succeeded")
	}
	if _, err := s.Events(ctx, "r1", 0, 100); err != nil {
		t.Fatal(err)
	}

	counts, err := s.RunCounts(ctx)
	if diff := cmp.Diff(map[string]int64{StatusRunning: 1, StatusDone: 1, StatusCancelled: 1}, counts); err != nil || diff != "" {
		t.Errorf("RunCounts() = %v (-want +got):\n%s", err, diff)
	}
	st := s.Stats()
	if st.EventsAppended != 7 {
		t.Errorf("EventsAppended = %d, want 7", st.EventsAppended)
	}
	// Three creates, two appends, two finishes: seven write transactions.
	for name, l := range map[string]struct {
		got  Latency
		want uint64
	}{"Write": {st.Write, 7}, "Read": {st.Read, 1}} {
		if l.got.Count != l.want || len(l.got.Buckets) != len(LatencyBounds) || l.got.Sum <= 0 {
			t.Errorf("%s = %+v, want %d observations in %d buckets", name, l.got, l.want, len(LatencyBounds))
		}
		for i := 1; i < len(l.got.Buckets); i++ {
			if l.got.Buckets[i] < l.got.Buckets[i-1] || l.got.Buckets[i] > l.got.Count {
				t.Errorf("%s buckets %v are not cumulative up to %d", name, l.got.Buckets, l.got.Count)
				break
			}
		}
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for _, d := range []time.Duration{100 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, time.Minute} {
		h.observe(d)
	}
	got := h.snapshot()
	want := Latency{Buckets: []uint64{1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3}, Count: 4,
		Sum: time.Minute + 4100*time.Microsecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
}
