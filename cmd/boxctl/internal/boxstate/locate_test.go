package boxstate

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// goneVendor is a vendor named name that lists ids and whose every box
// is already gone.
type goneVendor struct {
	name string
	ids  []string
}

func (v goneVendor) Name() string             { return v.name }
func (v goneVendor) Supports() vendors.Fields { return vendors.Fields{} }
func (v goneVendor) Create(context.Context, vendors.CreateSpec) (vendors.Box, error) {
	return nil, errors.New("creates nothing")
}
func (v goneVendor) Connect(context.Context, string) (vendors.Box, error) {
	return nil, vendors.ErrNotFound
}
func (v goneVendor) List(context.Context, map[string]string) ([]vendors.Info, error) {
	var out []vendors.Info
	for _, id := range v.ids {
		out = append(out, vendors.Info{ID: id})
	}
	return out, nil
}

func TestStore_RemoveArgs(t *testing.T) {
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := s.Update(t.Context(), func(st *State) error {
		st.Boxes = append(st.Boxes,
			Record{ID: "aaaa-docker-1", Target: "docker", Created: now, Deadline: now.Add(time.Hour)},
			Record{ID: "bbbb-e2b-1", Target: "e2b", Created: now, Deadline: now.Add(time.Hour)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var opened []string
	open := func(target string) (vendors.Vendor, error) {
		opened = append(opened, target)
		switch target {
		case "docker":
			return goneVendor{"docker", []string{"cccc-unrecorded"}}, nil
		case "e2b":
			return goneVendor{"e2b", nil}, nil
		}
		return nil, errors.New("no vendor " + target)
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	// Each recorded box on its record's vendor; the unrecorded one on
	// --target's; a name nobody knows fails without stopping the rest.
	done, err := s.RemoveArgs(t.Context(), st, open, "docker", []string{"aaaa", "bbbb-e2b-1", "cccc", "dddd"})
	if err == nil {
		t.Fatal("RemoveArgs of an unknown box: no error")
	}
	var ids []string
	for _, r := range done {
		ids = append(ids, r.ID)
	}
	if want := []string{"aaaa-docker-1", "bbbb-e2b-1", "cccc-unrecorded"}; !slices.Equal(ids, want) {
		t.Fatalf("removed %v, want %v", ids, want)
	}
	if !done[0].Forgotten || !done[1].Forgotten || done[2].Forgotten {
		t.Errorf("forgotten: %+v; want the two recorded boxes only", done)
	}
	if want := []string{"docker", "e2b", "docker", "docker"}; !slices.Equal(opened, want) {
		t.Errorf("vendors opened %v, want %v", opened, want)
	}
	if st, _ := s.Load(); len(st.Boxes) != 0 {
		t.Errorf("state keeps %+v", st.Boxes)
	}
}

func TestState_LastImage(t *testing.T) {
	st := &State{LastBuild: &LastBuild{Target: "docker", Image: "img:1"}}
	if img, err := st.LastImage("docker"); err != nil || img != "img:1" {
		t.Fatalf("LastImage(docker) = %q, %v", img, err)
	}
	var ae *ArgError
	if _, err := st.LastImage("registry"); !errors.As(err, &ae) {
		t.Fatalf("LastImage(registry) = %v, want an *ArgError", err)
	}
	if _, err := (&State{}).LastImage("docker"); !errors.As(err, &ae) {
		t.Fatalf("no build: %v, want an *ArgError", err)
	}
}
