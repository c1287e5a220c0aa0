package e2b_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxmeta"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/reaper"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// TestVendor_SuspendResume pauses and resumes a suspendable sandbox on the
// emulator: its files are byte-identical, its earlier processes are gone,
// its budget is what was left, and gc removes it past its retention.
func TestVendor_SuspendResume(t *testing.T) {
	env := e2btest.Shared(t)
	v := env.Client(t)
	ctx := t.Context()
	tag := vendortest.RunTag(t)
	box, err := v.Create(ctx, vendors.CreateSpec{Image: env.Template, RunTag: tag, Lifetime: 5 * time.Minute, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(ctx)) })
	run := func(b vendors.Box, script string) string {
		t.Helper()
		res, err := b.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", script}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %s", script, err, res.Stderr)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	const hash = "cd /tmp/ws && find . -type f | sort | xargs -r sha256sum | sha256sum"
	run(box, "mkdir -p /tmp/ws && head -c 65536 /dev/urandom > /tmp/ws/blob && echo kept > /tmp/ws/f")
	before := run(box, hash)
	if _, err := box.Spawn(ctx, vendors.SpawnSpec{Name: "keeper", Command: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	info, err := v.Suspend(ctx, box.ID())
	if err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	if info.BudgetLeft <= 4*time.Minute || info.BudgetLeft > 5*time.Minute {
		t.Errorf("Suspend = %+v, want about 5m of budget left", info)
	}
	if st, err := box.Status(ctx); err != nil || st.State != vendors.StateSuspended || !st.Deadline.After(time.Now().Add(59*time.Minute)) {
		t.Errorf("Status of a paused box = %s until %v (%v), want suspended for its retention", st.State, st.Deadline, err)
	}
	resumed, err := v.Resume(ctx, box.ID())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got := run(resumed, hash); got != before {
		t.Errorf("files after resume hash %s, want %s", got, before)
	}
	if out := run(resumed, "pgrep -x sleep || true"); out != "" {
		t.Errorf("the earlier run's process survived the resume: %s", out)
	}
	if _, err := resumed.Spawn(ctx, vendors.SpawnSpec{Name: "keeper", Command: []string{"true"}}); err != nil {
		t.Errorf("Spawn of a name the earlier run used: %v", err)
	}
	if st, err := resumed.Status(ctx); err != nil || st.State != vendors.StateRunning || time.Until(st.Deadline) > info.BudgetLeft+2*time.Second {
		t.Errorf("Status after resume = %s until %v (%v), want running with at most %v left", st.State, st.Deadline, err, info.BudgetLeft)
	}
	if _, err := v.Fork(ctx, box.ID(), 1); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Fork = %v, want a typed refusal", err)
	}
	if _, err := v.Suspend(ctx, box.ID()); err != nil {
		t.Fatal(err)
	}
	reaped, err := reaper.Reap(ctx, v, reaper.Options{Filter: map[string]string{boxmeta.LabelRunTag: tag},
		Now: func() time.Time { return time.Now().Add(2 * time.Hour) }})
	if err != nil || len(reaped) != 1 || reaped[0].Err != nil {
		t.Fatalf("gc two hours later = %+v, %v; want the paused box reaped", reaped, err)
	}
}
