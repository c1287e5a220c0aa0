package pool

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

const helperEnv = "BOXCTL_POOL_TAKE_HELPER"

// TestMain runs the take helper when asked to: it takes boxes of the pool
// file named in the environment until none is left and prints their ids.
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		r, err := newRegistry(dir, "p")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for {
			rec, ok, err := r.take(context.Background(), "claude-code", time.Now())
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if !ok {
				os.Exit(0)
			}
			fmt.Println(rec.BoxID)
		}
	}
	os.Exit(m.Run())
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
