package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/boxstate"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// fileVersion is the format of a pool's file.
const fileVersion = 1

// poolFile is the content of a pool's file: its waiting boxes.
type poolFile struct {
	Version int                     `json:"version"`
	Boxes   []sandbox.StandbyRecord `json:"boxes"`
}

// Name is what a pool's name may be.
var Name = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// DefaultDir is where pools' files are kept by default: pools/ beside
// the user's box state file.
func DefaultDir() (string, error) {
	p, err := boxstate.DefaultPath()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "pools"), nil
}

// registry is one pool's file.
type registry struct{ path string }

func newRegistry(dir, name string) (registry, error) {
	if !Name.MatchString(name) {
		return registry{}, fmt.Errorf("pool name %q: want lowercase letters, digits, '.', '_', '-'", name)
	}
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return registry{}, err
		}
		dir = d
	}
	return registry{path: filepath.Join(dir, name+".json")}, nil
}

// load reads the file; a missing one is an empty pool.
func (r registry) load() (*poolFile, error) {
	b, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &poolFile{Version: fileVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pool file: %w", err)
	}
	var f poolFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("pool file %s: %w", r.path, err)
	}
	if f.Version > fileVersion {
		return nil, fmt.Errorf("pool file %s has format %d, newer than this boxctl's %d", r.path, f.Version, fileVersion)
	}
	return &f, nil
}

// update changes the file under its lock and replaces it atomically.
func (r registry) update(ctx context.Context, fn func(*poolFile) error) error {
	unlock, err := boxstate.LockFile(ctx, r.path)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := r.load()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	f.Version = fileVersion
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".pool-*")
	if err != nil {
		return fmt.Errorf("pool file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("pool file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pool file: %w", err)
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		return fmt.Errorf("pool file: %w", err)
	}
	return nil
}

// take removes and returns the oldest box of harness whose keeper runs
// and that lives until at least until.
func (r registry) take(ctx context.Context, harness string, until time.Time) (sandbox.StandbyRecord, bool, error) {
	var got sandbox.StandbyRecord
	found := false
	err := r.update(ctx, func(f *poolFile) error {
		for i, b := range f.Boxes {
			if b.Harness != harness || reaper.OwnerGone(b.Keeper) || (!b.Deadline.IsZero() && b.Deadline.Before(until)) {
				continue
			}
			got, found = b, true
			f.Boxes = append(f.Boxes[:i], f.Boxes[i+1:]...)
			return nil
		}
		return nil
	})
	return got, found, err
}

// remove drops the box id; it reports whether it was there (and so no
// claimer has it).
func (r registry) remove(ctx context.Context, id string) (bool, error) {
	removed := false
	err := r.update(ctx, func(f *poolFile) error {
		for i, b := range f.Boxes {
			if b.BoxID == id {
				f.Boxes = append(f.Boxes[:i], f.Boxes[i+1:]...)
				removed = true
				return nil
			}
		}
		return nil
	})
	return removed, err
}

// Take removes from the pool name in dir ("" for DefaultDir) a box of
// harness that lives until at least until and returns it; found is false
// when the pool has none. No other Take, in any process, returns the
// same box.
func Take(ctx context.Context, dir, name, harness string, until time.Time) (rec sandbox.StandbyRecord, found bool, err error) {
	r, err := newRegistry(dir, name)
	if err != nil {
		return rec, false, err
	}
	return r.take(ctx, harness, until)
}

// List returns the boxes waiting in the pool name in dir.
func List(dir, name string) ([]sandbox.StandbyRecord, error) {
	r, err := newRegistry(dir, name)
	if err != nil {
		return nil, err
	}
	f, err := r.load()
	if err != nil {
		return nil, err
	}
	return f.Boxes, nil
}
