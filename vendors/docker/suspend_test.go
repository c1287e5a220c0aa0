package docker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

func TestLifetime_encoding(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	for _, l := range []lifetime{
		{Deadline: at},
		{Deadline: at, Suspended: true, BudgetLeft: 90 * time.Second, SuspendedAt: at, RetainUntil: at.Add(7 * 24 * time.Hour)},
	} {
		got, err := decodeLifetime(l.encode())
		if err != nil || !got.Deadline.Equal(l.Deadline) || got.Suspended != l.Suspended || got.BudgetLeft != l.BudgetLeft ||
			!got.SuspendedAt.Equal(l.SuspendedAt) || !got.RetainUntil.Equal(l.RetainUntil) {
			t.Errorf("decode(encode(%+v)) = %+v, %v", l, got, err)
		}
	}
	for _, bad := range []string{"", "state=running\n", "deadline=soon\n"} {
		if _, err := decodeLifetime([]byte(bad)); err == nil {
			t.Errorf("decodeLifetime(%q) = nil error, want one", bad)
		}
	}
}

// workspaceHash is a digest of every file under /workspace, names and
// contents.
func workspaceHash(t *testing.T, b vendors.Box) string {
	t.Helper()
	res := exec1(t, b, "sh", "-c", "cd /workspace && find . -type f | sort | xargs -r sha256sum | sha256sum")
	if res.ExitCode != 0 {
		t.Fatalf("hash the workspace: %s", res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func running(t *testing.T, v *Vendor, id string) bool {
	t.Helper()
	c, err := v.cli.ContainerInspect(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c.State.Running && c.State.Pid != 0
}

func TestVendor_SuspendResumeFork(t *testing.T) {
	t.Parallel()
	v, img := newVendor(t)
	ctx := t.Context()
	tag := vendortest.RunTag(t)
	box := create(t, v, vendors.CreateSpec{Image: img, RunTag: tag, Lifetime: 5 * time.Minute, Retention: time.Hour})
	exec1(t, box, "sh", "-c", "head -c 100000 /dev/urandom > /workspace/blob && mkdir -p /workspace/d && echo kept > /workspace/d/f")
	before := workspaceHash(t, box)
	if _, err := box.Spawn(ctx, vendors.SpawnSpec{Name: "keeper", Command: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}

	info, err := v.Suspend(ctx, box.ID())
	if err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	if info.BudgetLeft <= 4*time.Minute || info.BudgetLeft > 5*time.Minute || time.Until(info.RetainUntil) < 59*time.Minute {
		t.Errorf("Suspend = %+v, want about 5m of budget left and an hour of retention", info)
	}
	if running(t, v, box.ID()) {
		t.Error("the container of a suspended box still runs: suspend frees nothing")
	}
	st, err := box.Status(ctx)
	if err != nil || st.State != vendors.StateSuspended || !st.Deadline.Equal(info.RetainUntil.Truncate(time.Second)) {
		t.Errorf("Status of a suspended box = %s until %v (%v), want suspended until %v", st.State, st.Deadline, err, info.RetainUntil)
	}
	if again, err := v.Suspend(ctx, box.ID()); err != nil || again.BudgetLeft != info.BudgetLeft {
		t.Errorf("a second Suspend = %+v, %v; want the first's record", again, err)
	}

	// A start that is not a Resume ends at once: the active budget is
	// kept for Resume.
	if err := v.cli.ContainerStart(ctx, box.ID(), container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	okC, errC := v.cli.ContainerWait(ctx, box.ID(), container.WaitConditionNotRunning)
	select {
	case r := <-okC:
		if r.StatusCode != 124 {
			t.Errorf("a plain start of a suspended box exited %d, want 124 (its deadline passed)", r.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}

	resumed, err := v.Resume(ctx, box.ID())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if !running(t, v, box.ID()) {
		t.Fatal("a resumed box does not run")
	}
	if got := workspaceHash(t, resumed); got != before {
		t.Errorf("workspace hash after resume = %s, want %s", got, before)
	}
	if _, err := resumed.Spawn(ctx, vendors.SpawnSpec{Name: "keeper", Command: []string{"true"}}); err != nil {
		t.Errorf("Spawn of a name the earlier run used: %v", err)
	}
	st, err = resumed.Status(ctx)
	if left := time.Until(st.Deadline); err != nil || st.State != vendors.StateRunning || left > info.BudgetLeft+time.Second || left < info.BudgetLeft-time.Minute {
		t.Errorf("Status after resume = %s, %v left (%v), want running with %v left", st.State, left, err, info.BudgetLeft)
	}
	if _, err := v.Resume(ctx, box.ID()); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Resume of a running box = %v, want ErrNotSuspendable", err)
	}

	// Fork: two boxes of the suspended disk, each resumable on its own.
	if _, err := v.Suspend(ctx, box.ID()); err != nil {
		t.Fatal(err)
	}
	ids, err := v.Fork(ctx, box.ID(), 2)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	var img0 string
	for i, id := range ids {
		fb, err := v.Resume(ctx, id)
		if err != nil {
			t.Fatalf("Resume fork %d: %v", i, err)
		}
		t.Cleanup(func() { _ = fb.Destroy(t.Context()) })
		if got := workspaceHash(t, fb); got != before {
			t.Errorf("fork %d workspace hash = %s, want %s", i, got, before)
		}
		exec1(t, fb, "sh", "-c", "echo fork > /workspace/d/f")
		c, _ := v.cli.ContainerInspect(ctx, id)
		img0 = c.Image
	}
	for i, id := range ids {
		fb, _ := v.Connect(ctx, id)
		if err := fb.Destroy(ctx); err != nil {
			t.Errorf("destroy fork %d: %v", i, err)
		}
	}
	if _, err := v.cli.ImageInspect(ctx, img0); err == nil {
		t.Errorf("the forks' image %s remains after the last fork went", img0)
	}
	if src, err := v.Resume(ctx, box.ID()); err != nil {
		t.Fatal(err)
	} else if got := workspaceHash(t, src); got != before {
		t.Errorf("the source's workspace changed with its forks: %s, want %s", got, before)
	}

	// A box suspended past its retention is gone after gc.
	if _, err := v.Suspend(ctx, box.ID()); err != nil {
		t.Fatal(err)
	}
	vendortest.ReapPastRetention(t, v, tag, box.ID(), 2*time.Hour)
}

func TestVendor_SuspendRefusals(t *testing.T) {
	t.Parallel()
	v, img := newVendor(t)
	plain := create(t, v, vendors.CreateSpec{Image: img, Lifetime: time.Minute})
	if _, err := v.Suspend(t.Context(), plain.ID()); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Suspend of a box made without a retention = %v, want ErrNotSuspendable", err)
	}
	if _, err := v.Fork(t.Context(), plain.ID(), 1); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Fork of a box made without a retention = %v, want ErrNotSuspendable", err)
	}
	if _, err := v.Resume(t.Context(), "no-such-box"); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Resume of no box = %v, want ErrNotFound", err)
	}
}
