package boxstate

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

// TestStore_Create checks record-then-create: the record is in the state
// while the box is being created, it gets the box's reference when the
// create succeeds, and a failed create forgets it and stops its local
// model endpoint.
func TestStore_Create(t *testing.T) {
	deadline := time.Unix(2000000000, 0).UTC()
	tests := []struct {
		name    string
		err     error
		wantRec bool
	}{
		{"created", nil, true},
		{"create fails", errors.New("no capacity"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
			if err != nil {
				t.Fatal(err)
			}
			router, err := localrouter.Start(t.Context(), localrouter.Options{
				Command: []string{"sh", "-c", `echo http://127.0.0.1:1/; exec sleep 60`},
				Log:     filepath.Join(t.TempDir(), "r.log")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = router.Stop() })
			rec := Record{Target: "docker", Image: "img", RunTag: "run-create", Created: time.Now().UTC(),
				Deadline: time.Now().Add(time.Hour).UTC(), Router: router}
			got, err := s.Create(t.Context(), nil, rec, func(_ context.Context, tag string) (sandbox.Reference, error) {
				st, lerr := s.Load()
				if lerr != nil {
					t.Fatal(lerr)
				}
				if r := st.FindRunTag(tag); tag != rec.RunTag || r == nil || !r.Pending() {
					t.Errorf("during the create, the state holds %+v for run %s; want the pending record", r, tag)
				}
				return sandbox.Reference{BoxID: "box-1234567890", Bearer: "b", Deadline: deadline}, tt.err
			})
			if !errors.Is(err, tt.err) {
				t.Fatalf("Create() = %v, want %v", err, tt.err)
			}
			st, _ := s.Load()
			if !tt.wantRec {
				if len(st.Boxes) != 0 || router.Running() {
					t.Errorf("after a failed create: records %+v, router running %v; want none, stopped", st.Boxes, router.Running())
				}
				return
			}
			if got.ID != "box-1234567890" || got.Reference == nil || !got.Deadline.Equal(deadline) {
				t.Errorf("Create() = %+v, want the box's id, reference and deadline", got)
			}
			if r := st.Find("box-1234567890"); len(st.Boxes) != 1 || r == nil || r.RunTag != rec.RunTag || !router.Running() {
				t.Errorf("after the create: records %+v, router running %v; want the box once, router running", st.Boxes, router.Running())
			}
		})
	}
}

// TestStore_CreateUnrecorded: when the state cannot take the record
// before the create, nothing is created and the router is stopped.
func TestStore_CreateUnrecorded(t *testing.T) {
	s, _ := Open(Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	unlock, err := s.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	called := false
	_, err = s.Create(ctx, nil, Record{RunTag: "run-x"}, func(context.Context, string) (sandbox.Reference, error) {
		called = true
		return sandbox.Reference{}, nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || called {
		t.Errorf("Create() with the state locked = %v (create called %v), want the deadline and no create", err, called)
	}
}
