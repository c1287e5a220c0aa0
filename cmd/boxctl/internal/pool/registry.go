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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox"
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
// and that lives until at least until. The takes of this process queue
// by pool file and are served in batches, each in one update of the file
// (a burst of claims costs a few writes of it, not one each). A take
// whose ctx ends before its batch takes the file's lock gets no box; one
// whose ctx ends after that gets its box, which the caller then destroys
// as any box it cannot use.
func (r registry) take(ctx context.Context, harness string, until time.Time) (sandbox.StandbyRecord, bool, error) {
	v, _ := takeQueues.LoadOrStore(r.path, &takeQueue{})
	q := v.(*takeQueue)
	t := &pendingTake{ctx: ctx, harness: harness, until: until, done: make(chan takeResult, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, t)
	if !q.serving {
		q.serving = true
		go r.serveTakes(q)
	}
	q.mu.Unlock()
	select {
	case res := <-t.done:
		return res.rec, res.ok, res.err
	case <-ctx.Done():
	}
	q.mu.Lock()
	if i := slices.Index(q.pending, t); i >= 0 {
		q.pending = slices.Delete(q.pending, i, i+1)
		q.mu.Unlock()
		return sandbox.StandbyRecord{}, false, fmt.Errorf("take a pool box: %w", context.Cause(ctx))
	}
	q.mu.Unlock()
	res := <-t.done // its batch is being served (see serveTakes)
	return res.rec, res.ok, res.err
}

// takeLockWait bounds how long a batch of takes waits for the pool file's
// lock, which another process may hold; the wait also ends once the ctx
// of every take in the batch has.
const takeLockWait = time.Minute

// takeQueues are the take queues of this process, by pool file path.
var takeQueues sync.Map

type takeQueue struct {
	mu      sync.Mutex
	pending []*pendingTake
	serving bool // a serveTakes runs
}

type pendingTake struct {
	ctx     context.Context
	harness string
	until   time.Time
	done    chan takeResult
}

type takeResult struct {
	rec sandbox.StandbyRecord
	ok  bool
	err error
}

// serveTakes serves q's takes, a batch per update of the file, until none
// is left.
func (r registry) serveTakes(q *takeQueue) {
	for {
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		if len(batch) == 0 {
			q.serving = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		got := make([]takeResult, len(batch))
		ctx, cancel := context.WithTimeout(context.Background(), takeLockWait)
		var left atomic.Int32
		left.Store(int32(len(batch)))
		stops := make([]func() bool, len(batch))
		for i, t := range batch {
			stops[i] = context.AfterFunc(t.ctx, func() {
				if left.Add(-1) == 0 {
					cancel()
				}
			})
		}
		err := r.update(ctx, func(f *poolFile) error {
			for i, t := range batch {
				if err := t.ctx.Err(); err != nil {
					// Ended meanwhile: no box for it to give back.
					got[i] = takeResult{err: fmt.Errorf("take a pool box: %w", context.Cause(t.ctx))}
					continue
				}
				for j, b := range f.Boxes {
					if b.Harness != t.harness || reaper.OwnerGone(b.Keeper) || (!b.Deadline.IsZero() && b.Deadline.Before(t.until)) {
						continue
					}
					got[i] = takeResult{rec: b, ok: true}
					f.Boxes = slices.Delete(f.Boxes, j, j+1)
					break
				}
			}
			return nil
		})
		for _, stop := range stops {
			stop()
		}
		cancel()
		for i, t := range batch {
			if err != nil && got[i].err == nil {
				got[i] = takeResult{err: err} // the file is as it was
			}
			t.done <- got[i]
		}
	}
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
