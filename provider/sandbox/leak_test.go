package sandbox_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/emukit"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

var (
	leakCycles = flag.Int("leak-cycles", 10, "create/destroy cycles per emulator in TestLeaks_Emulators (1000 for the full size)")
	leakKills  = flag.Int("leak-kills", 3, "callers killed mid-Create in TestLeaks_DockerCallerKilled (200 for the full size)")
)

// faulty is an emulator's fault switch and its count.
type faulty interface {
	SetFaults(emukit.Faults) error
	FaultCounts() emukit.Counts
}

// cycleLabel marks each cycle's box, so that two boxes of one create show.
const cycleLabel = "chaos-cycle"

// leakFaults are the control plane's faults of the emulator cycles: 30%
// of calls fail, 429 or 5xx, and half the failed creates and deletes take
// effect before their 5xx (a lost create).
var leakFaults = emukit.Faults{ErrorRate: 0.3, LostRate: 0.5, RetryAfter: 50 * time.Millisecond}

// goneOwner is the owner label of a process that runs until the returned
// function ends it: the caller of the cycles, who dies before the gc.
func goneOwner(t *testing.T) (string, func()) {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// pid:<host>:<pid>:<start>, of the child.
	parts := strings.Split(reaper.ProcessOwner(), ":")
	parts[2], parts[3] = strconv.Itoa(cmd.Process.Pid), reaper.ProcessStart(cmd.Process.Pid)
	label := strings.Join(parts, ":")
	var once sync.Once
	end := func() { once.Do(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }) }
	t.Cleanup(end)
	return label, end
}

// leakStats are the figures of a leak run.
type leakStats struct {
	cycles, createErrs, destroyErrs int
	leftBeforeGC, duplicates        int
	reaped, leftAfterGC             int
}

// cycles runs n create/destroy cycles on v from image, four at a time,
// with faults on; then turns them off, counts what is left (and the
// cycles that left two boxes), ends the owner and runs the gc.
func cycles(t *testing.T, v vendors.Vendor, image string, n int, setFaults func(emukit.Faults) error) leakStats {
	t.Helper()
	tag := sandbox.NewRunTag()
	owner, endOwner := goneOwner(t)
	if err := setFaults(leakFaults); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	st := leakStats{cycles: n}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range work {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				box, err := v.Create(ctx, vendors.CreateSpec{Image: image, Lifetime: 30 * time.Minute, RunTag: tag, Owner: owner,
					Labels: map[string]string{cycleLabel: strconv.Itoa(i)}})
				var derr error
				if err == nil {
					derr = box.Destroy(ctx)
				}
				cancel()
				mu.Lock()
				if err != nil {
					st.createErrs++
				}
				if derr != nil {
					st.destroyErrs++
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := setFaults(emukit.Faults{}); err != nil {
		t.Fatal(err)
	}
	filter := map[string]string{boxmeta.LabelRunTag: tag}
	left, err := v.List(t.Context(), filter)
	if err != nil {
		t.Fatal(err)
	}
	st.leftBeforeGC = len(left)
	per := map[string]int{}
	for _, b := range left {
		per[b.Labels[cycleLabel]]++
	}
	for _, k := range per {
		if k > 1 {
			st.duplicates++
		}
	}
	endOwner()
	reaped, err := sandbox.GC(t.Context(), v, sandbox.GCOptions{Filter: filter})
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	st.reaped = len(reaped)
	after, err := v.List(t.Context(), filter)
	if err != nil {
		t.Fatal(err)
	}
	st.leftAfterGC = len(after)
	return st
}

// TestLeaks_Emulators runs create/destroy cycles on each emulator with 30%
// of its control plane calls failing: after the gc no box is left, and no
// cycle made two.
func TestLeaks_Emulators(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct {
		name string
		make func(t *testing.T) (vendors.Vendor, string, faulty)
	}{
		{"e2b", func(t *testing.T) (vendors.Vendor, string, faulty) {
			env := e2btest.Start(t, nil)
			return env.Client(t), env.Template, env.Server
		}},
		{"daytona", func(t *testing.T) (vendors.Vendor, string, faulty) {
			emu, v := sandboxtest.DaytonaEmulator(t, f, daytonaemu.Options{})
			return v, "box", emu
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, image, emu := tc.make(t)
			start := time.Now()
			st := cycles(t, v, image, *leakCycles, emu.SetFaults)
			n := emu.FaultCounts()
			t.Logf("%s: %d cycles in %v, faults injected: %d 429, %d 5xx (%d took effect); %d creates and %d destroys failed after retries, %d boxes left before gc (%d cycles with two), gc reaped %d, %d left",
				tc.name, st.cycles, time.Since(start).Round(time.Second), n.Throttled, n.Failed, n.Lost, st.createErrs, st.destroyErrs,
				st.leftBeforeGC, st.duplicates, st.reaped, st.leftAfterGC)
			if st.leftAfterGC != 0 || st.duplicates != 0 {
				t.Errorf("%d boxes left after gc, %d cycles with two boxes: want none", st.leftAfterGC, st.duplicates)
			}
			if n.Throttled+n.Failed == 0 {
				t.Errorf("no fault was injected")
			}
		})
	}
}

// TestLeaks_DockerCallerKilled kills a caller with SIGKILL at a random
// point of its Create on Docker, then runs the gc: no box of its run tag
// is left, none was made twice, and the time from the kill to the box's
// removal is logged.
func TestLeaks_DockerCallerKilled(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var took []time.Duration
	var boxes, dups, late int
	for i := range *leakKills {
		tag := sandbox.NewRunTag()
		cmd, _ := execChild(t, f, "exit", tag, 10*time.Minute)
		// The fault's moment, not a wait for a state: Create takes about
		// three seconds here, and the kill lands anywhere in it, from
		// before the vendor call to the bridge's wait.
		time.Sleep(time.Duration(rand.Int64N(int64(4 * time.Second))))
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		_ = cmd.Wait()
		filter := map[string]string{boxmeta.LabelRunTag: tag}
		left, err := f.Vendor.List(t.Context(), filter)
		if err != nil {
			t.Fatal(err)
		}
		boxes += len(left)
		if len(left) > 1 {
			dups++
		}
		// A create the engine was still carrying out when its caller died
		// shows up after the kill: gc until none is left, under a deadline.
		var after []vendors.Info
		for deadline := time.Now().Add(time.Minute); ; {
			if _, err := sandbox.GC(t.Context(), f.Vendor, sandbox.GCOptions{Filter: filter}); err != nil {
				t.Fatalf("gc: %v", err)
			}
			if after, err = f.Vendor.List(t.Context(), filter); err != nil {
				t.Fatal(err)
			}
			if len(after) == 0 || time.Now().After(deadline) {
				break
			}
			late++
		}
		if len(after) != 0 {
			t.Errorf("kill %d: %d boxes of run %s left a minute after the kill: %+v", i, len(after), tag, after)
		}
		if len(left) > 0 || late > 0 {
			took = append(took, time.Since(killed))
		}
	}
	q := func(p float64) time.Duration { return sandboxtest.Quantile(took, p).Round(time.Millisecond) }
	t.Logf("docker: %d callers killed mid-Create, %d had made a box (%d with two, %d gc rounds for boxes that showed after the kill), kill to removal p50 %v p99 %v max %v",
		*leakKills, len(took), dups, late, q(0.5), q(0.99), q(1))
	if dups != 0 {
		t.Errorf("%d killed creates made two boxes (%d boxes in all)", dups, boxes)
	}
}
