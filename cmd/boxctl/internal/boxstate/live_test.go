package boxstate

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// liveVendor is the real Docker vendor of the test bed, with the box image.
func liveVendor(t *testing.T) (*docker.Vendor, string) {
	t.Helper()
	env := testbed.Require(t)
	img := boxtest.Image(t, boxtest.Options{})
	v, err := docker.New(docker.WithHost(env.DockerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, img
}

func newTag(prefix string) string { return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) }

// createBox makes a box on v and removes it when the test ends.
func createBox(t *testing.T, v vendors.Vendor, img, tag, owner string) string {
	t.Helper()
	b, err := v.Create(t.Context(), vendors.CreateSpec{Image: img, Lifetime: 10 * time.Minute, RunTag: tag, Owner: owner})
	if err != nil {
		t.Fatalf("Create(run %s): %v", tag, err)
	}
	t.Cleanup(func() { _ = Destroy(context.Background(), v, b.ID()) })
	return b.ID()
}

// TestStore_Collect reconciles a state with the real Docker vendor: the
// box of this state that the state forgot is reaped, the boxes the state
// names and another state's boxes are kept, and the records whose boxes
// are gone or whose create never finished are forgotten; a dry run
// changes nothing.
func TestStore_Collect(t *testing.T) {
	v, img := liveVendor(t)
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	other := reaper.StateOwner(User(), "/elsewhere/boxes.json", false)
	tagKept, tagForgotten, tagOther := newTag("kept"), newTag("forgot"), newTag("other")
	kept := createBox(t, v, img, tagKept, s.Owner())
	forgotten := createBox(t, v, img, tagForgotten, s.Owner())
	othersBox := createBox(t, v, img, tagOther, other)
	past := time.Now().Add(-time.Minute).UTC()
	if err := s.Update(t.Context(), func(st *State) error {
		st.Boxes = append(st.Boxes,
			Record{ID: kept, Target: "docker", RunTag: tagKept, Deadline: time.Now().Add(time.Hour)},
			Record{ID: "0000gonebox", Target: "docker", RunTag: "run-gone", Deadline: time.Now().Add(time.Hour)},
			Record{Target: "docker", RunTag: "run-never", Deadline: past},
			Record{ID: "0000e2bbox", Target: "e2b", RunTag: "run-e2b", Deadline: past})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{kept: true, forgotten: true, othersBox: true}
	wantRemoved := map[string]string{forgotten: reaper.ReasonForgotten}
	wantForgotten := map[string]string{"run-gone": ReasonBoxGone, "run-never": ReasonNeverCreate}
	for _, dryRun := range []bool{true, false} {
		res, err := s.Collect(t.Context(), v, "docker", dryRun)
		if err != nil {
			t.Fatal(err)
		}
		removed := map[string]string{}
		for _, e := range res.Removed {
			if ours[e.ID] {
				removed[e.ID] = e.Reason
			}
			if e.Error != "" && ours[e.ID] {
				t.Errorf("Collect(dry run %v): box %s: %s", dryRun, e.ID, e.Error)
			}
		}
		forgot := map[string]string{}
		for _, e := range res.Forgotten {
			forgot[e.RunTag] = e.Reason
		}
		if !maps.Equal(removed, wantRemoved) || !maps.Equal(forgot, wantForgotten) || res.DryRun != dryRun {
			t.Errorf("Collect(dry run %v) removed %v, forgot %v; want %v, %v", dryRun, removed, forgot, wantRemoved, wantForgotten)
		}
		st, _ := s.Load()
		_, err = v.Connect(t.Context(), forgotten)
		if dryRun && (len(st.Boxes) != 4 || err != nil) {
			t.Errorf("after the dry run: %d records, forgotten box: %v; want all 4 records and the box", len(st.Boxes), err)
		}
		if !dryRun && (len(st.Boxes) != 2 || st.Find(kept) == nil || st.FindRunTag("run-e2b") == nil || !errors.Is(err, vendors.ErrNotFound)) {
			t.Errorf("after the collect: records %+v, forgotten box: %v; want the kept box and the e2b record, the box gone", st.Boxes, err)
		}
		// Only the collect that destroyed the box recorded its event.
		if evs := readEvents(t, s); len(evs) != map[bool]int{true: 0, false: 1}[dryRun] ||
			!dryRun && (evs[0].BoxID != forgotten || evs[0].Type != sandbox.EventDestroyed || evs[0].Reason != sandbox.ReasonGC) {
			t.Errorf("after the collect (dry run %v): events %+v, want one destroyed by gc of %s, after the real one", dryRun, evs, forgotten)
		}
	}
	for _, id := range []string{kept, othersBox} {
		if _, err := v.Connect(t.Context(), id); err != nil {
			t.Errorf("box %s after the collect: %v, want it kept", id, err)
		}
	}
}

// TestStore_CreateRollBack: a box created whose record cannot be written
// is destroyed, and the error says so.
func TestStore_CreateRollBack(t *testing.T) {
	v, img := liveVendor(t)
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	_, err = s.Create(t.Context(), v, Record{Target: "docker", Image: img, RunTag: newTag("rollback")},
		func(ctx context.Context, tag string) (sandbox.Reference, error) {
			id = createBox(t, v, img, tag, s.Owner())
			// The state breaks between the create and its record.
			if err := os.WriteFile(s.Path(), []byte("{"), 0o600); err != nil {
				t.Fatal(err)
			}
			return sandbox.Reference{Vendor: "docker", BoxID: id}, nil
		})
	if err == nil || !strings.Contains(err.Error(), "record box") {
		t.Fatalf("Create() = %v, want the failed record", err)
	}
	if _, err := v.Connect(t.Context(), id); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("the unrecorded box %s: Connect = %v, want it destroyed", id, err)
	}
}

// readEvents reads the whole event log of s.
func readEvents(t *testing.T, s *Store) []sandbox.Event {
	t.Helper()
	var evs []sandbox.Event
	if err := s.Events().Read(t.Context(), false, func(ev sandbox.Event) error { evs = append(evs, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestStore_Remove destroys a recorded box on the real Docker vendor,
// forgets its record and records its destroyed event; a box already gone,
// and one the state does not know, are removed without error.
func TestStore_Remove(t *testing.T) {
	v, img := liveVendor(t)
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	tag := newTag("rm")
	id := createBox(t, v, img, tag, s.Owner())
	if err := s.Update(t.Context(), func(st *State) error {
		st.Boxes = append(st.Boxes, Record{ID: id, Target: "docker", RunTag: tag, Deadline: time.Now().Add(time.Hour)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Load()
	r, err := s.Remove(t.Context(), v, id, st.Find(id))
	if err != nil || !r.Destroyed || !r.Forgotten || r.RouterStopped {
		t.Fatalf("Remove = %+v, %v; want destroyed and forgotten", r, err)
	}
	if _, err := v.Connect(t.Context(), id); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("box %s after Remove: %v, want it gone", id, err)
	}
	if st, _ := s.Load(); st.Find(id) != nil {
		t.Errorf("the record of %s is still in the state", id)
	}
	if r, err := s.Remove(t.Context(), v, id, nil); err != nil || !r.Destroyed || r.Forgotten {
		t.Errorf("Remove of a box already gone = %+v, %v; want destroyed, nothing forgotten", r, err)
	}
	evs := readEvents(t, s)
	if len(evs) != 2 || evs[0].BoxID != id || evs[0].RunTag != tag || evs[0].Reason != sandbox.ReasonUser || evs[1].RunTag != "" {
		t.Errorf("events = %+v, want two destroyed by the user, the first with its run tag", evs)
	}
}

// TestStore_CollectEvery: with a period it collects round after round,
// goes on past a failed report, and ends with nil when its context ends;
// without one it collects once and returns the report's error.
func TestStore_CollectEvery(t *testing.T) {
	v, _ := liveVendor(t)
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("the report failed")
	rounds := 0
	if err := s.CollectEvery(t.Context(), v, "docker", true, 0, func(Collected) error { rounds++; return failed }); !errors.Is(err, failed) || rounds != 1 {
		t.Fatalf("CollectEvery(once) = %v after %d rounds, want the report's error after 1", err, rounds)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rounds = 0
	start := time.Now()
	err = s.CollectEvery(ctx, v, "docker", true, time.Second, func(res Collected) error {
		if !res.DryRun {
			t.Error("a dry run's round is not one")
		}
		if rounds++; rounds == 3 {
			cancel()
		}
		return failed
	})
	if err != nil || rounds != 3 {
		t.Fatalf("CollectEvery(every 1s) = %v after %d rounds, want nil after 3", err, rounds)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("3 rounds a second apart took %v", took)
	}
}
