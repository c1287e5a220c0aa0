package reaper_test

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// TestReap runs the reaper against the real Docker vendor: a box whose
// owning process is gone and one its owner's state forgot are reaped
// (first as a dry run, which removes nothing), a box of a live process is
// kept until its deadline passes.
func TestReap(t *testing.T) {
	env := testbed.Require(t)
	img := boxtest.Image(t, boxtest.Options{})
	v, err := docker.New(docker.WithHost(env.DockerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	tag := "reap-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	filter := reaper.RunTagFilter(tag)
	t.Cleanup(func() {
		boxes, _ := v.List(context.Background(), filter)
		for _, b := range boxes {
			if box, err := v.Connect(context.Background(), b.ID); err == nil {
				_ = box.Destroy(context.Background())
			}
		}
	})
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	host := strings.Split(reaper.ProcessOwner(), ":")[1]
	gone := strings.Join([]string{"pid", host, strconv.Itoa(done.Process.Pid), "1"}, ":")
	forgotten := reaper.UserOwner("reaper-test")
	create := func(owner string) string {
		t.Helper()
		b, err := v.Create(t.Context(), vendors.CreateSpec{Image: img, Lifetime: 10 * time.Minute, RunTag: tag, Owner: owner})
		if err != nil {
			t.Fatalf("Create(owner %s): %v", owner, err)
		}
		return b.ID()
	}
	idGone, idForgotten, idLive := create(gone), create(forgotten), create(reaper.ProcessOwner())
	known := func(b vendors.Info) bool { return b.Owner() != forgotten }
	want := map[string]string{idGone: reaper.ReasonOwnerGone, idForgotten: reaper.ReasonForgotten}
	check := func(name string, got []reaper.Reaped, want map[string]string) {
		t.Helper()
		m := map[string]string{}
		for _, r := range got {
			if r.Err != nil {
				t.Errorf("%s: box %s: %v", name, r.Box.ID, r.Err)
			}
			m[r.Box.ID] = r.Reason
		}
		if len(m) != len(want) {
			t.Errorf("%s reaped %v, want %v", name, m, want)
		}
		for id, reason := range want {
			if m[id] != reason {
				t.Errorf("%s: box %s reason %q, want %q", name, id, m[id], reason)
			}
		}
	}
	dry, err := reaper.Reap(t.Context(), v, reaper.Options{Filter: filter, DryRun: true, Known: known})
	if err != nil {
		t.Fatal(err)
	}
	check("dry run", dry, want)
	if left := ids(t, v, filter); len(left) != 3 {
		t.Fatalf("after the dry run %d boxes are left, want 3", len(left))
	}
	reaped, err := reaper.Reap(t.Context(), v, reaper.Options{Filter: filter, Known: known})
	if err != nil {
		t.Fatal(err)
	}
	check("reap", reaped, want)
	if left := ids(t, v, filter); !slices.Equal(left, []string{idLive}) {
		t.Fatalf("after the reap the boxes %v are left, want only %s", left, idLive)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	expired, err := reaper.Reap(t.Context(), v, reaper.Options{Filter: filter, Known: known, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	check("past the deadline", expired, map[string]string{idLive: reaper.ReasonExpired})
	if left := ids(t, v, filter); len(left) != 0 {
		t.Errorf("after the deadline the boxes %v are left, want none", left)
	}
}

func ids(t *testing.T, v vendors.Vendor, filter map[string]string) []string {
	t.Helper()
	boxes, err := v.List(t.Context(), filter)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range boxes {
		out = append(out, b.ID)
	}
	return out
}
