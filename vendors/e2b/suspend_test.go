package e2b_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
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
	box := suspendableBox(t, v, env.Template, tag)
	run := func(b vendors.Box, script string) string { return shOut(t, b, script) }
	before := run(box, seedWorkspace+" && "+hashWorkspace)
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
	if got := run(resumed, hashWorkspace); got != before {
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
	if _, err := v.Suspend(ctx, box.ID()); err != nil {
		t.Fatal(err)
	}
	vendortest.ReapPastRetention(t, v, tag, box.ID(), 2*time.Hour)
}

// snapshots returns the snapshot IDs the emulator lists of sandbox sid.
func snapshots(t *testing.T, env *e2btest.Env, sid string) []string {
	t.Helper()
	req := httptest.NewRequest("GET", "http://api."+env.Server.Domain()+"/snapshots?sandboxID="+sid, nil)
	req.Header.Set("X-API-Key", e2btest.APIKey)
	w := httptest.NewRecorder()
	env.Server.ServeHTTP(w, req)
	var list []struct{ SnapshotID string }
	if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || err != nil {
		t.Fatalf("GET /snapshots = %d %s", w.Code, w.Body)
	}
	out := []string{}
	for _, s := range list {
		out = append(out, s.SnapshotID)
	}
	return out
}

// TestVendor_Fork forks a paused sandbox into two on the emulator with
// one fork call: each is paused, has the source's labels (E2B's forks
// have their snapshot's metadata), resumes with the source's files and
// what was left of its budget, and goes on on its own; the source stays
// paused, and no snapshot template is made.
func TestVendor_Fork(t *testing.T) {
	env := e2btest.Shared(t)
	v := env.Client(t)
	ctx := t.Context()
	tag := vendortest.RunTag(t)
	src := suspendableBox(t, v, env.Template, tag)
	run := func(b vendors.Box, script string) string { return shOut(t, b, script) }
	before := run(src, seedWorkspace+" && "+hashWorkspace)
	if _, err := v.Fork(ctx, src.ID(), 1); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Fork of a running box = %v, want a typed refusal", err)
	}
	info, err := v.Suspend(ctx, src.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Fork(ctx, src.ID(), 0); err == nil {
		t.Error("Fork of 0 boxes succeeded")
	}
	ids, err := v.Fork(ctx, src.ID(), 2)
	for _, id := range ids {
		t.Cleanup(func() {
			if b, err := v.Connect(context.WithoutCancel(ctx), id); err == nil {
				_ = b.Destroy(context.WithoutCancel(ctx))
			}
		})
	}
	if err != nil || len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("Fork = %v, %v; want two new boxes", ids, err)
	}
	if st, err := src.Status(ctx); err != nil || st.State != vendors.StateSuspended {
		t.Errorf("source after the fork = %s (%v), want suspended", st.State, err)
	}
	if got := snapshots(t, env, src.ID()); len(got) != 0 {
		t.Errorf("snapshots of the source = %v, want none: a fork makes no template", got)
	}
	srcInfo, err := src.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list, err := v.List(ctx, map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil || len(list) != 3 {
		t.Fatalf("List of the run = %d, %v; want the source and its 2 forks", len(list), err)
	}
	listed := map[string]vendors.Info{}
	for _, in := range list {
		listed[in.ID] = in
	}
	forks := make([]vendors.Box, 2)
	for i, id := range ids {
		if in, ok := listed[id]; !ok || in.State != vendors.StateSuspended || !maps.Equal(in.Labels, srcInfo.Labels) {
			t.Errorf("fork %s listed %v as %+v, want suspended with the source's labels %v", id, ok, in, srcInfo.Labels)
		}
		if forks[i], err = v.Resume(ctx, id); err != nil {
			t.Fatalf("Resume fork %d: %v", i, err)
		}
		if got := run(forks[i], hashWorkspace); got != before {
			t.Errorf("fork %d's files hash %s, want the source's %s", i, got, before)
		}
		st, err := forks[i].Status(ctx)
		if err != nil || st.State != vendors.StateRunning || time.Until(st.Deadline) > info.BudgetLeft+2*time.Second ||
			time.Until(st.Deadline) < info.BudgetLeft-time.Minute {
			t.Errorf("fork %d after resume = %s until %v (%v), want running with about %v left", i, st.State, st.Deadline, err, info.BudgetLeft)
		}
		if st.Labels[boxmeta.LabelRunTag] != tag {
			t.Errorf("fork %d labels %v: want the source's run tag", i, st.Labels)
		}
	}
	run(forks[0], "echo mine > /tmp/ws/f")
	if got := run(forks[1], "cat /tmp/ws/f"); got != "kept" {
		t.Errorf("fork 1 reads %q after fork 0 wrote its file, want its own %q", got, "kept")
	}
	for i, f := range forks {
		if err := f.Destroy(ctx); err != nil {
			t.Fatalf("Destroy fork %d: %v", i, err)
		}
	}
	if got := snapshots(t, env, src.ID()); len(got) != 0 {
		t.Errorf("snapshots after the forks were destroyed = %v, want none", got)
	}
	if left := env.Server.Sandboxes(); slices.Contains(left, ids[0]) || slices.Contains(left, ids[1]) {
		t.Errorf("sandboxes after the forks were destroyed = %v, want neither fork", left)
	}
}

// TestVendor_ForkFails forks past the plan's sandbox limit, one fork of
// two made and one refused: Fork fails with nothing of it left (the fork
// made destroyed), no snapshot, the source paused.
func TestVendor_ForkFails(t *testing.T) {
	img := boxtest.Pushed(t, boxtest.Options{})
	env := e2btest.Start(t, func(o *e2bemu.Options) { o.Templates, o.MaxSandboxes = map[string]string{"box": img}, 3 })
	v := env.Client(t, e2b.WithRetry(1, time.Millisecond, time.Millisecond))
	ctx := t.Context()
	tag := vendortest.RunTag(t)
	src, err := v.Create(ctx, vendors.CreateSpec{Image: env.Template, RunTag: tag, Lifetime: 5 * time.Minute, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Destroy(context.WithoutCancel(ctx)) })
	other, err := v.Create(ctx, vendors.CreateSpec{Image: env.Template, RunTag: tag, Lifetime: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Destroy(context.WithoutCancel(ctx)) })
	if _, err := v.Suspend(ctx, src.ID()); err != nil {
		t.Fatal(err)
	}
	ids, err := v.Fork(ctx, src.ID(), 2)
	var rl *vendors.RateLimitError
	if !errors.As(err, &rl) || ids != nil {
		t.Errorf("Fork over the plan's limit = %v, %v; want a *vendors.RateLimitError and no ids", ids, err)
	}
	if left := env.Server.Sandboxes(); len(left) != 2 || !slices.Contains(left, src.ID()) || !slices.Contains(left, other.ID()) {
		t.Errorf("sandboxes after the failed Fork = %v, want only %s and %s", left, src.ID(), other.ID())
	}
	if got := snapshots(t, env, src.ID()); len(got) != 0 {
		t.Errorf("snapshots left after the failed Fork: %v", got)
	}
	if st, err := src.Status(ctx); err != nil || st.State != vendors.StateSuspended {
		t.Errorf("source after the failed fork = %s (%v), want suspended", st.State, err)
	}

	// When the destroy of the fork made fails too, the error names it.
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/sandboxes/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"code":500,"message":"kill refused"}`))
			return
		}
		env.Server.ServeHTTP(w, r)
	}))
	t.Cleanup(refuse.Close)
	rv := env.Client(t, e2b.WithRetry(1, time.Millisecond, time.Millisecond), e2b.WithDial(refuse.Listener.Addr().String()))
	_, err = rv.Fork(ctx, src.ID(), 2)
	var ce *vendors.CleanupError
	if !errors.As(err, &ce) || !errors.As(err, &rl) || ce.BoxID == src.ID() || ce.BoxID == other.ID() ||
		!slices.Contains(env.Server.Sandboxes(), ce.BoxID) {
		t.Fatalf("Fork whose cleanup fails = %v; want a *vendors.CleanupError naming the fork left, of a *vendors.RateLimitError", err)
	}
	if !env.Server.Vanish(ce.BoxID) {
		t.Errorf("fork %s named by the CleanupError is not there", ce.BoxID)
	}
}

// seedWorkspace writes a workspace of random and fixed files in a box, and
// hashWorkspace prints the hash of its files.
const (
	seedWorkspace = "mkdir -p /tmp/ws && head -c 65536 /dev/urandom > /tmp/ws/blob && echo kept > /tmp/ws/f"
	hashWorkspace = "cd /tmp/ws && find . -type f | sort | xargs -r sha256sum | sha256sum"
)

// suspendableBox creates a suspendable box of template on v for t, with
// run tag tag, destroyed at t's end.
func suspendableBox(t *testing.T, v *e2b.Vendor, template, tag string) vendors.Box {
	t.Helper()
	box, err := v.Create(t.Context(), vendors.CreateSpec{Image: template, RunTag: tag, Lifetime: 5 * time.Minute, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(t.Context())) })
	return box
}

// shOut runs script in b and returns its trimmed output, failing t unless
// it exits 0.
func shOut(t *testing.T, b vendors.Box, script string) string {
	t.Helper()
	res, err := b.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", script}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v %s", script, err, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}
