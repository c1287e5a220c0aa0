package replicate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// fakeReplica answers the replica routes from memory; fail makes its
// next posts answer 503.
type fakeReplica struct {
	mu     sync.Mutex
	runs   map[string]*wire.ReplicaRun
	events map[string][]json.RawMessage
	fail   int
	posts  int
	none   bool // no replica: 404
	// claims are what the list says it holds beyond the truth (a list
	// that lies, or a replica that lost data): a batch after it is a gap.
	claims map[string]int64
}

func (f *fakeReplica) call(_ context.Context, method, path string, body []byte) (int, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.none {
		return http.StatusNotFound, []byte(`{"type":"not_found"}`), nil
	}
	if method == http.MethodGet && path == wire.ReplicaPath {
		var out wire.ReplicaRuns
		for _, r := range f.runs {
			out.Runs = append(out.Runs, *r)
		}
		for id, last := range f.claims {
			out.Runs = append(out.Runs, wire.ReplicaRun{ID: id, Status: "running", LastSeq: last})
		}
		b, _ := json.Marshal(out)
		return http.StatusOK, b, nil
	}
	run := strings.TrimPrefix(path, wire.ReplicaPath+"/")
	f.posts++
	if f.fail > 0 {
		f.fail--
		return http.StatusServiceUnavailable, nil, nil
	}
	var b wire.ReplicaBatch
	if err := json.Unmarshal(body, &b); err != nil {
		return http.StatusBadRequest, nil, nil
	}
	r := f.runs[run]
	if r == nil {
		r = &wire.ReplicaRun{ID: run}
		f.runs[run] = r
	}
	if b.First > r.LastSeq+1 {
		out, _ := json.Marshal(map[string]any{"type": wire.TypeReplicaGap, "run": r})
		return http.StatusConflict, out, nil
	}
	for i, e := range b.Events {
		if seq := b.First + int64(i); seq > r.LastSeq {
			f.events[run] = append(f.events[run], e)
			r.LastSeq = seq
		}
	}
	r.Status = b.Status
	out, _ := json.Marshal(r)
	return http.StatusOK, out, nil
}

func (f *fakeReplica) held(run string) (int64, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.runs[run]; r != nil {
		return r.LastSeq, r.Status
	}
	return 0, ""
}

func newStore(t *testing.T, q *Queue) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), t.TempDir(), store.Options{OnChange: q.Mark})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func frames(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf(`{"type":"message.part.updated","n":%d}`, from+i))
	}
	return out
}

// TestRun_ships: every event of a run reaches the replica in order with
// its end, through failed posts (retried), small batches (several per
// run) and a replica that already held part of the run (a restarted
// bridge: it resumes after what is held).
func TestRun_ships(t *testing.T) {
	q := NewQueue()
	st := newStore(t, q)
	ctx := t.Context()
	for _, id := range []string{"run_1", "run_2", "run_3"} {
		if _, _, err := st.CreateRun(ctx, store.Run{ID: id, Digest: "sha256:d", Harness: "claude-code", SessionID: "ses_" + id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Append(ctx, "run_1", frames(1, 40)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "run_3", frames(1, 4)); err != nil {
		t.Fatal(err)
	}
	f := &fakeReplica{runs: map[string]*wire.ReplicaRun{"run_2": {ID: "run_2", Status: "running", LastSeq: 0}},
		events: map[string][]json.RawMessage{}, fail: 3, claims: map[string]int64{"run_3": 2}}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(rctx, Options{Store: st, Queue: q, Call: f.call, MaxBatchBytes: 300, Retry: 10 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	if _, err := st.Append(ctx, "run_2", frames(1, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, "run_1", store.Finish{Status: store.StatusDone}, frames(41, 1)); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "both runs shipped", func() bool {
		l1, s1 := f.held("run_1")
		l2, _ := f.held("run_2")
		l3, _ := f.held("run_3")
		return l1 == 41 && s1 == store.StatusDone && l2 == 5 && l3 == 4
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, e := range f.events["run_1"] {
		if want := fmt.Sprintf(`"n":%d}`, i+1); !strings.Contains(string(e), want) {
			t.Fatalf("event %d of run_1 = %s", i+1, e)
		}
	}
	if f.posts < 5 {
		t.Errorf("%d posts for 46 events in batches of 300 bytes and 3 failures, want several", f.posts)
	}
}

// TestRun_noReplica: an upstream without a replica stops the shipper,
// and marks never block meanwhile.
func TestRun_noReplica(t *testing.T) {
	q := NewQueue()
	st := newStore(t, q)
	f := &fakeReplica{none: true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(t.Context(), Options{Store: st, Queue: q, Call: f.call})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the shipper goes on without a replica")
	}
	for range 10000 {
		q.Mark("run_x") // never blocks
	}
}

// TestRun_drain: a drain ships what is marked, then ends the shipper; a
// shipper that never had an answer (no upstream yet) ends at once.
func TestRun_drain(t *testing.T) {
	q := NewQueue()
	st := newStore(t, q)
	if _, _, err := st.CreateRun(t.Context(), store.Run{ID: "run_d", Digest: "sha256:d", Harness: "claude-code"}); err != nil {
		t.Fatal(err)
	}
	f := &fakeReplica{runs: map[string]*wire.ReplicaRun{}, events: map[string][]json.RawMessage{}}
	drain := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(t.Context(), Options{Store: st, Queue: q, Call: f.call, Drain: drain})
	}()
	polltest.Until(t, 10*time.Second, "the shipper's first pass", func() bool { l, s := f.held("run_d"); return l == 0 && s == "running" })
	if _, err := st.Finish(t.Context(), "run_d", store.Finish{Status: store.StatusDone}, frames(1, 2)); err != nil {
		t.Fatal(err)
	}
	close(drain)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the drained shipper did not end")
	}
	if l, s := f.held("run_d"); l != 2 || s != store.StatusDone {
		t.Errorf("after the drain the replica holds %d events, %q; want the run's end", l, s)
	}

	never := make(chan struct{})
	blocked := func(ctx context.Context, _, _ string, _ []byte) (int, []byte, error) {
		<-ctx.Done()
		return 0, nil, ctx.Err()
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		Run(t.Context(), Options{Store: st, Queue: q, Call: blocked, Drain: never})
	}()
	close(never)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a shipper with no upstream did not end at the drain")
	}
}

// TestQueue_Hold: a reader waits for the replica to hold an event only
// while the replica takes batches, until the event's acknowledgement,
// and never longer than the bound (in a bubble's virtual time).
func TestQueue_Hold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := NewQueue()
		start := time.Now()
		q.Hold(t.Context(), "run_1", 5, time.Second)
		if d := time.Since(start); d != 0 {
			t.Errorf("with no replica the reader waited %v", d)
		}
		q.setShipping(true)
		q.ack("run_1", 5)
		q.Hold(t.Context(), "run_1", 5, time.Second)
		if d := time.Since(start); d != 0 {
			t.Errorf("for an acknowledged event the reader waited %v", d)
		}
		go func() {
			<-time.After(30 * time.Millisecond)
			q.ack("run_1", 7)
		}()
		start = time.Now()
		q.Hold(t.Context(), "run_1", 7, time.Second)
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Errorf("the reader waited %v for an acknowledgement 30ms away", d)
		}
		start = time.Now()
		q.Hold(t.Context(), "run_1", 9, 50*time.Millisecond)
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("with no acknowledgement the reader waited %v, want the 50ms bound", d)
		}
		go func() {
			<-time.After(10 * time.Millisecond)
			q.setShipping(false) // the shipper stopped
		}()
		start = time.Now()
		q.Hold(t.Context(), "run_2", 1, time.Second)
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("the reader waited %v after the shipper stopped 10ms in", d)
		}
	})
}
