package daytona_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// TestVendor_Fork forks a suspended box twice: each fork is a stopped
// sandbox of the emulator with the source's labels (its own create token,
// the source as fork-of), environment and intervals, and resumes with
// the source's files; the source is stopped again and resumes too. A
// running box, an unsuspendable one and n < 1 are refused.
func TestVendor_Fork(t *testing.T) {
	emu, v := emulator(t, daytonaemu.Options{})
	forkOnce(t, emu, v)
}

// forkOnce runs the fork scenario of TestVendor_Fork.
func forkOnce(t *testing.T, emu *daytonaemu.Server, v *daytona.Vendor) {
	t.Helper()
	ctx := t.Context()
	tag := vendortest.RunTag(t)
	mk := func(retain time.Duration) vendors.Box {
		b, err := v.Create(ctx, vendors.CreateSpec{Image: snapshotName, RunTag: tag, Lifetime: 10 * time.Minute,
			Retention: retain, Env: map[string]string{"FORK_GREETING": "hello"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Destroy(context.WithoutCancel(ctx)) })
		return b
	}
	src := mk(2 * time.Hour)
	if _, err := src.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "echo kept > /tmp/fork-file"}}); err != nil {
		t.Fatal(err)
	}
	var ns *vendors.NotSuspendableError
	if _, err := v.Fork(ctx, src.ID(), 1); !errors.As(err, &ns) {
		t.Errorf("Fork of a running box = %v, want *NotSuspendableError", err)
	}
	if _, err := v.Fork(ctx, mk(0).ID(), 1); !errors.As(err, &ns) {
		t.Errorf("Fork of a box without a retention = %v, want *NotSuspendableError", err)
	}
	if _, err := v.Suspend(ctx, src.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Fork(ctx, src.ID(), 0); err == nil {
		t.Error("Fork of 0 boxes succeeded")
	}
	begin := time.Now()
	ids, err := v.Fork(ctx, src.ID(), 2)
	for _, id := range ids {
		t.Cleanup(func() {
			if b, err := v.Connect(context.WithoutCancel(ctx), id); err == nil {
				_ = b.Destroy(context.WithoutCancel(ctx))
			}
		})
	}
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	t.Logf("fork of 2 boxes: %v", time.Since(begin).Round(time.Millisecond))
	if len(ids) != 2 || ids[0] == ids[1] || ids[0] == src.ID() || ids[1] == src.ID() {
		t.Fatalf("Fork = %v, want two new ids", ids)
	}
	orig := sandboxJSON(t, emu, src.ID())
	if orig["state"] != daytona.StateStopped {
		t.Errorf("source state after the fork = %v, want stopped", orig["state"])
	}
	origLabels := orig["labels"].(map[string]any)
	tokens := map[any]bool{origLabels[boxmeta.LabelCreate]: true}
	for i, id := range ids {
		sb := sandboxJSON(t, emu, id)
		labels := sb["labels"].(map[string]any)
		env := sb["env"].(map[string]any)
		switch {
		case sb["state"] != daytona.StateStopped:
			t.Errorf("fork %d state %v, want stopped", i, sb["state"])
		case labels[boxmeta.LabelForkOf] != src.ID():
			t.Errorf("fork %d labels %v, want %s = %s", i, labels, boxmeta.LabelForkOf, src.ID())
		case labels[boxmeta.LabelRetention] != origLabels[boxmeta.LabelRetention] || labels[boxmeta.LabelRunTag] != tag:
			t.Errorf("fork %d labels %v, want the source's %v", i, labels, origLabels)
		case tokens[labels[boxmeta.LabelCreate]]:
			t.Errorf("fork %d shares a create token: %v", i, labels[boxmeta.LabelCreate])
		case sb["autoDeleteInterval"] != orig["autoDeleteInterval"] || sb["autoArchiveInterval"] != orig["autoArchiveInterval"] ||
			sb["autoStopInterval"] != orig["autoStopInterval"]:
			t.Errorf("fork %d intervals %v/%v/%v, want the source's %v/%v/%v", i, sb["autoStopInterval"], sb["autoArchiveInterval"],
				sb["autoDeleteInterval"], orig["autoStopInterval"], orig["autoArchiveInterval"], orig["autoDeleteInterval"])
		case env["FORK_GREETING"] != "hello":
			t.Errorf("fork %d env %v, want the source's", i, env)
		}
		tokens[labels[boxmeta.LabelCreate]] = true
	}
	infos, err := v.List(ctx, map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil {
		t.Fatal(err)
	}
	suspended := 0
	for _, in := range infos {
		if in.State == vendors.StateSuspended {
			suspended++
		}
	}
	if suspended != 3 {
		t.Errorf("List: %d suspended boxes, want the source and its 2 forks (%v)", suspended, infos)
	}
	var boxes []vendors.Box
	for i, id := range append(ids, src.ID()) {
		b, err := v.Resume(ctx, id)
		if err != nil {
			t.Fatalf("Resume %d: %v", i, err)
		}
		res, err := b.Exec(ctx, vendors.ExecSpec{Command: []string{"cat", "/tmp/fork-file"}})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "kept" {
			t.Errorf("box %d after resume: /tmp/fork-file = %q, %v; want kept", i, res.Stdout, err)
		}
		boxes = append(boxes, b)
	}
	// The fork snapshot goes with the last fork.
	snap, _ := sandboxJSON(t, emu, ids[0])["snapshot"].(string)
	for i, b := range boxes[:2] {
		if err := b.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Snapshot(ctx, snap); (err == nil) != (i == 0) {
			t.Errorf("after the destroy of fork %d: snapshot %s look-up = %v", i, snap, err)
		}
	}
}

// TestVendor_ForkUnderFaults forks a suspended box into 4 while 30% of the
// control plane's calls fail with 429 or 503 (half of the failed changing
// calls having taken effect): the fork succeeds with 4 distinct stopped
// boxes, and the run holds no other sandbox (none made twice).
func TestVendor_ForkUnderFaults(t *testing.T) {
	emu, v := emulator(t, daytonaemu.Options{}, daytona.WithCreateAttempts(8))
	ctx := t.Context()
	tag := vendortest.RunTag(t)
	src, err := v.Create(ctx, vendors.CreateSpec{Image: snapshotName, RunTag: tag, Lifetime: 10 * time.Minute, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Destroy(context.WithoutCancel(ctx)) })
	if _, err := v.Suspend(ctx, src.ID()); err != nil {
		t.Fatal(err)
	}
	if err := emu.SetFaults(daytonaemu.Faults{ErrorRate: 0.3, LostRate: 0.5,
		Statuses: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}}); err != nil {
		t.Fatal(err)
	}
	const n = 4
	ids, err := v.Fork(ctx, src.ID(), n)
	if serr := emu.SetFaults(daytonaemu.Faults{}); serr != nil {
		t.Fatal(serr)
	}
	for _, id := range ids {
		t.Cleanup(func() {
			if b, err := v.Connect(context.WithoutCancel(ctx), id); err == nil {
				_ = b.Destroy(context.WithoutCancel(ctx))
			}
		})
	}
	if err != nil {
		t.Fatalf("Fork under faults: %v", err)
	}
	want := map[string]bool{src.ID(): true}
	for _, id := range ids {
		want[id] = true
	}
	if len(want) != n+1 {
		t.Fatalf("Fork = %v, want %d distinct new ids", ids, n)
	}
	list, err := v.List(ctx, map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if !want[in.ID] {
			t.Errorf("sandbox %s of the run is neither the source nor a fork: a duplicate", in.ID)
		} else if in.State != vendors.StateSuspended {
			t.Errorf("sandbox %s is %s, want suspended", in.ID, in.State)
		}
	}
	if len(list) != n+1 {
		t.Errorf("List(run tag) = %d sandboxes, want %d", len(list), n+1)
	}
}
