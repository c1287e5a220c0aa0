package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

// stateEnv overrides the path of the state file.
const stateEnv = "BOXCTL_STATE"

// stateVersion is the format of the state file.
const stateVersion = 1

// boxState is the per-user state file: the boxes `boxctl up` made (with
// what `turn` needs to drive them again, the bearer included) and the image
// of the last `boxctl build`. It holds a secret, so it is
// mode 0600 in a 0700 directory.
type boxState struct {
	Version int         `json:"version"`
	Boxes   []boxRecord `json:"boxes"`
	// LastBuild is the image of the last `boxctl build`, with its target.
	LastBuild *lastBuild `json:"lastBuild,omitempty"`
}

// boxRecord is one box in the state.
type boxRecord struct {
	// ID is the box's vendor id; empty while `up` is creating it.
	ID     string `json:"id,omitempty"`
	Target string `json:"target"`
	Image  string `json:"image"`
	// RunTag is the box's run tag, known before the box exists, so gc
	// keeps a box whose `up` has not recorded its id yet.
	RunTag   string    `json:"runTag"`
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline"`
	// Reference is what Provider.Connect needs; its Bearer is a secret.
	Reference *sandbox.Reference `json:"reference,omitempty"`
	// Router is the local model endpoint `up --router local` started.
	Router *localRouter `json:"router,omitempty"`
}

// pending reports whether `up` is still creating the box.
func (r *boxRecord) pending() bool { return r.ID == "" }

// lastBuild is the image of the last docker build.
type lastBuild struct {
	Target string    `json:"target"`
	Image  string    `json:"image"`
	Digest string    `json:"digest,omitempty"`
	Built  time.Time `json:"built"`
}

// statePath returns $BOXCTL_STATE, else $XDG_STATE_HOME/boxctl/boxes.json,
// else ~/.local/state/boxctl/boxes.json.
func statePath() (string, error) {
	if p := os.Getenv(stateEnv); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "boxctl", "boxes.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state file: %w (set %s)", err, stateEnv)
	}
	return homeStatePath(home), nil
}

// homeStatePath is the state file of the user whose home is home, when
// neither BOXCTL_STATE nor XDG_STATE_HOME is set.
func homeStatePath(home string) string {
	return filepath.Join(home, ".local", "state", "boxctl", "boxes.json")
}

// stateFile is the state at one path.
type stateFile struct{ path string }

func openState() (stateFile, error) {
	p, err := statePath()
	return stateFile{path: p}, err
}

// readState opens the state file and reads it.
func readState() (stateFile, *boxState, error) {
	sf, err := openState()
	if err != nil {
		return sf, nil, err
	}
	st, err := sf.load()
	return sf, st, err
}

// load reads the state without the lock: writes replace the file
// atomically, so a reader sees one whole version. A missing file is an
// empty state.
func (s stateFile) load() (*boxState, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &boxState{Version: stateVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var st boxState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read state %s: %w", s.path, err)
	}
	if st.Version > stateVersion {
		return nil, fmt.Errorf("read state %s: format version %d is newer than this boxctl's %d", s.path, st.Version, stateVersion)
	}
	st.Version = stateVersion
	return &st, nil
}

// update runs fn on the current state under the state's lock and writes
// the result back atomically (temporary file, then rename) unless fn
// fails. Waiting for the lock ends with ctx.
func (s stateFile) update(ctx context.Context, fn func(*boxState) error) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := s.load()
	if err != nil {
		return err
	}
	if err := fn(st); err != nil {
		return err
	}
	return s.write(st)
}

// lock takes the exclusive flock of the state's lock file (next to it:
// the state file itself is replaced by every write).
func (s stateFile) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	f, err := os.OpenFile(s.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state: %w", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock state %s: %w", s.path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock state %s: %w", s.path, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// write replaces the state file with st: a 0600 temporary file in the
// same directory, synced, then renamed over it.
func (s stateFile) write(st *boxState) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(st); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	dir := filepath.Dir(s.path)
	tmp, err := os.CreateTemp(dir, ".boxes-*.json")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600; Chmod states it whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// find returns the record of box id, or nil.
func (st *boxState) find(id string) *boxRecord {
	for i := range st.Boxes {
		if st.Boxes[i].ID == id {
			return &st.Boxes[i]
		}
	}
	return nil
}

// findRunTag returns the record of the box with run tag tag, or nil.
func (st *boxState) findRunTag(tag string) *boxRecord {
	for i := range st.Boxes {
		if st.Boxes[i].RunTag == tag {
			return &st.Boxes[i]
		}
	}
	return nil
}

// remove forgets the records for which drop is true and returns them.
func (st *boxState) remove(drop func(*boxRecord) bool) []boxRecord {
	var gone []boxRecord
	kept := st.Boxes[:0]
	for _, r := range st.Boxes {
		if drop(&r) {
			gone = append(gone, r)
		} else {
			kept = append(kept, r)
		}
	}
	st.Boxes = kept
	return gone
}
