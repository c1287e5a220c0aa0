package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

const helperEnv = "BOXCTL_POOL_TAKE_HELPER"

// takeHelper is the take helper that TestMain runs when asked to: it
// takes boxes of the pool file in dir until none is left and prints their
// ids.
func takeHelper(dir string) int {
	r, err := newRegistry(dir, "p")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for {
		rec, ok, err := r.take(context.Background(), "claude-code", time.Now())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if !ok {
			return 0
		}
		fmt.Println(rec.BoxID)
	}
}

func fill(t *testing.T, r registry, n int, keeper string) {
	t.Helper()
	err := r.update(context.Background(), func(f *poolFile) error {
		for i := range n {
			f.Boxes = append(f.Boxes, sandbox.StandbyRecord{BoxID: fmt.Sprintf("box-%03d", i), Harness: "claude-code",
				Token: "token", Keeper: keeper, Created: time.Now(), Deadline: time.Now().Add(time.Hour)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTake_AcrossProcesses: two processes take from one pool file of 200
// boxes at once; every box is taken exactly once.
func TestTake_AcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	r, err := newRegistry(dir, "p")
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	fill(t, r, n, reaper.ProcessOwner())
	outs := make([]string, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"="+dir)
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("helper %d: %v", i, err)
			}
			outs[i] = string(out)
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for i, out := range outs {
		ids := strings.Fields(out)
		t.Logf("process %d took %d boxes", i, len(ids))
		for _, id := range ids {
			seen[id]++
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("box %s was taken %d times", id, c)
		}
	}
	if len(seen) != n {
		t.Errorf("%d boxes taken, want %d", len(seen), n)
	}
}

// TestTake_Queue: concurrent takes of one process get distinct boxes,
// as many as the file holds; a take whose ctx ends while it waits in the
// queue leaves it without a box, and one whose batch is under way gets
// its box.
func TestTake_Queue(t *testing.T) {
	r, _ := newRegistry(t.TempDir(), "p")
	fill(t, r, 10, reaper.ProcessOwner())
	var mu sync.Mutex
	seen := map[string]bool{}
	misses := 0
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			rec, ok, err := r.take(context.Background(), "claude-code", time.Now())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case !ok:
				misses++
			case seen[rec.BoxID]:
				t.Errorf("box %s taken twice", rec.BoxID)
			default:
				seen[rec.BoxID] = true
			}
		})
	}
	wg.Wait()
	if len(seen) != 10 || misses != 2 {
		t.Errorf("12 takes of 10 boxes: %d boxes, %d misses; want 10 and 2", len(seen), misses)
	}

	// The file's lock held elsewhere: the first take's batch waits for it,
	// the second waits in the queue until its ctx ends.
	fill(t, r, 2, reaper.ProcessOwner())
	unlock, err := boxstate.LockFile(context.Background(), r.path)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan takeResult, 1)
	go func() {
		rec, ok, err := r.take(context.Background(), "claude-code", time.Now())
		first <- takeResult{rec, ok, err}
	}()
	v, _ := takeQueues.Load(r.path)
	q := v.(*takeQueue)
	polltest.Until(t, 10*time.Second, "the first take's batch under way", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.serving && len(q.pending) == 0 })
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, ok, err := r.take(ctx, "claude-code", time.Now())
		if ok {
			err = errors.New("the queued take got a box")
		}
		second <- err
	}()
	polltest.Until(t, 10*time.Second, "the second take queued", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.pending) == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Errorf("a take cancelled in the queue = %v, want context.Canceled", err)
	}
	unlock()
	if res := <-first; res.err != nil || !res.ok {
		t.Errorf("the take whose batch waited for the lock = %v, %v; want a box", res.ok, res.err)
	}
	if left, _ := List(filepath.Dir(r.path), "p"); len(left) != 1 {
		t.Errorf("%d boxes left, want 1 (the cancelled take's)", len(left))
	}

	// Two takes in a batch that waits for the lock, one of which ends
	// meanwhile: it gets no box, the other one does.
	fill(t, r, 1, reaper.ProcessOwner())
	if unlock, err = boxstate.LockFile(context.Background(), r.path); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	pair := make(chan takeResult, 2)
	q.mu.Lock()
	q.serving = true // as if served already: both queue, then one batch serves them
	q.mu.Unlock()
	for _, c := range []context.Context{ctx, context.Background()} {
		go func() {
			rec, ok, err := r.take(c, "claude-code", time.Now())
			pair <- takeResult{rec, ok, err}
		}()
	}
	polltest.Until(t, 10*time.Second, "two takes queued", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.pending) == 2
	})
	go r.serveTakes(q)
	polltest.Until(t, 10*time.Second, "their batch under way", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.pending) == 0
	})
	cancel()
	unlock()
	var oks, cancelled int
	for range 2 {
		res := <-pair
		switch {
		case res.ok && res.err == nil:
			oks++
		case errors.Is(res.err, context.Canceled):
			cancelled++
		}
	}
	if oks != 1 || cancelled != 1 {
		t.Errorf("a batch of two, one cancelled: %d boxes, %d cancelled; want 1 and 1", oks, cancelled)
	}
	if left, _ := List(filepath.Dir(r.path), "p"); len(left) != 1 {
		t.Errorf("%d boxes left, want 1 (the cancelled take's)", len(left))
	}

	// A batch whose every take's ctx ended stops waiting for the lock.
	if unlock, err = boxstate.LockFile(context.Background(), r.path); err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel = context.WithCancel(context.Background())
	alone := make(chan error, 1)
	go func() {
		_, _, err := r.take(ctx, "claude-code", time.Now())
		alone <- err
	}()
	polltest.Until(t, 10*time.Second, "the lone take's batch under way", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.serving && len(q.pending) == 0
	})
	cancel()
	if err := <-alone; !errors.Is(err, context.Canceled) {
		t.Errorf("the lone take cancelled while its batch waited for the lock = %v, want context.Canceled", err)
	}
	if left, _ := List(filepath.Dir(r.path), "p"); len(left) != 1 {
		t.Errorf("%d boxes left, want 1", len(left))
	}
}

func TestTake_Skips(t *testing.T) {
	// This process with another start time: a keeper that is gone.
	own := reaper.ProcessOwner()
	gone := own[:strings.LastIndexByte(own, ':')+1] + "1"
	tests := []struct {
		name    string
		rec     sandbox.StandbyRecord
		harness string
		until   time.Time
		want    bool
	}{
		{"a box of its harness", sandbox.StandbyRecord{Harness: "claude-code", Keeper: reaper.ProcessOwner()}, "claude-code", time.Now(), true},
		{"another harness", sandbox.StandbyRecord{Harness: "codex", Keeper: reaper.ProcessOwner()}, "claude-code", time.Now(), false},
		{"a keeper that is gone", sandbox.StandbyRecord{Harness: "claude-code", Keeper: gone}, "claude-code", time.Now(), false},
		{"a box ending too soon", sandbox.StandbyRecord{Harness: "claude-code", Keeper: reaper.ProcessOwner(), Deadline: time.Now().Add(time.Minute)},
			"claude-code", time.Now().Add(time.Hour), false},
	}
	if !reaper.OwnerGone(gone) {
		t.Fatalf("owner %s is not gone", gone)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newRegistry(t.TempDir(), "p")
			tt.rec.BoxID = "b"
			if err := r.update(context.Background(), func(f *poolFile) error { f.Boxes = append(f.Boxes, tt.rec); return nil }); err != nil {
				t.Fatal(err)
			}
			_, ok, err := r.take(context.Background(), tt.harness, tt.until)
			if err != nil || ok != tt.want {
				t.Errorf("take = %v, %v; want %v", ok, err, tt.want)
			}
			left, _ := List(filepath.Dir(r.path), "p")
			if (len(left) == 0) != tt.want {
				t.Errorf("%d boxes left after take %v", len(left), ok)
			}
		})
	}
}

func TestNewRegistry_Name(t *testing.T) {
	for name, ok := range map[string]bool{"docker-claude": true, "a": true, "": false, "../x": false, "A": false, "a b": false} {
		if _, err := newRegistry(t.TempDir(), name); (err == nil) != ok {
			t.Errorf("newRegistry(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
