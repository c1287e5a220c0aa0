package boxstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tangle-network/boxctl/vendors"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/flock"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// PathEnv overrides the path of the state file.
const PathEnv = "BOXCTL_STATE"

// Version is the format of the state file.
const Version = 1

// State is the content of the state file.
type State struct {
	Version int      `json:"version"`
	Boxes   []Record `json:"boxes"`
	// LastBuild is the image of the last `boxctl build`, with its target.
	LastBuild *LastBuild `json:"lastBuild,omitempty"`
}

// Record is one box in the state.
type Record struct {
	// ID is the box's vendor id; empty while Create is creating it.
	ID     string `json:"id,omitempty"`
	Target string `json:"target"`
	Image  string `json:"image"`
	// RunTag is the box's run tag, known before the box exists, so that
	// Collect keeps a box whose create has not recorded its id yet.
	RunTag   string    `json:"runTag"`
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline"`
	// Reference is what sandbox.Provider.Connect needs; its Bearer is a
	// secret.
	Reference *sandbox.Reference `json:"reference,omitempty"`
	// Router is the local model endpoint started for the box.
	Router *localrouter.Process `json:"router,omitempty"`
	// Upstream names the box's upstream at the user's broker ("" for a
	// box made before there was one, whose model key it holds itself).
	Upstream string `json:"upstream,omitempty"`
	// BrokerURL is where the box reaches the broker when it was given
	// (up --broker-url); empty: where the broker serves the vendor's boxes.
	BrokerURL string `json:"brokerUrl,omitempty"`
	// BrokerCA are the PEM certificates the box trusts for an https
	// BrokerURL (up --broker-ca): public, unlike a key.
	BrokerCA string `json:"brokerCa,omitempty"`
	// Webhooks receive the box's lifecycle events (up --webhook); their
	// secret is never stored.
	Webhooks []string `json:"webhooks,omitempty"`
	// Egress is the box's egress policy as last set (up --allow/--egress,
	// boxctl net); nil: none, the box's network is open.
	Egress *egress.Policy `json:"egress,omitempty"`
}

// Pending reports whether the box is still being created.
func (r *Record) Pending() bool { return r.ID == "" }

// LastBuild is the image of the last build.
type LastBuild struct {
	Target string    `json:"target"`
	Image  string    `json:"image"`
	Digest string    `json:"digest,omitempty"`
	Built  time.Time `json:"built"`
}

// Options tune Open.
type Options struct {
	// Path is the state file. Default: DefaultPath.
	Path string
	// Logger receives what a command may warn about but not fail on.
	// Default: discard.
	Logger *slog.Logger
	// Gates finds the gate of a confined box, for Suspend and Resume.
	// Default: none (a confined box's address is then not forgotten at
	// suspend, and its resume is refused where a gate holds its policy).
	Gates GateFunc
}

// Store is one state file.
type Store struct {
	path  string
	owner string
	log   *slog.Logger
	gates GateFunc
}

// GateFunc returns the gate that holds the policy of rec's confined box on
// v (sandbox.Options.EgressGate), where boxctl enforces it: a suspend
// forgets the box's address there, a resume tells it the new one.
type GateFunc func(ctx context.Context, v vendors.Vendor, rec *Record) (sandbox.EgressGate, error)

// Open returns the store of the state file o names; it touches no file.
func Open(o Options) (*Store, error) {
	s := &Store{path: o.Path, log: o.Logger, gates: o.Gates}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.path == "" {
		p, err := DefaultPath()
		if err != nil {
			return nil, err
		}
		s.path = p
	}
	s.owner = stateOwner(s.path)
	return s, nil
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Owner is the owner label (reaper.StateOwner) of the boxes this state
// keeps.
func (s *Store) Owner() string { return s.owner }

// DefaultPath returns $BOXCTL_STATE, else
// $XDG_STATE_HOME/boxctl/boxes.json, else ~/.local/state/boxctl/boxes.json.
func DefaultPath() (string, error) {
	if p := os.Getenv(PathEnv); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "boxctl", "boxes.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state file: %w (set %s)", err, PathEnv)
	}
	return homePath(home), nil
}

// homePath is the state file of the user whose home is home, when
// neither BOXCTL_STATE nor XDG_STATE_HOME is set.
func homePath(home string) string {
	return filepath.Join(home, ".local", "state", "boxctl", "boxes.json")
}

// User is the user whose state owns the boxes.
func User() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}

// stateOwner is the owner label of the boxes the state file at path
// keeps: the user's, with a digest of the path for a file other than the
// home one.
func stateOwner(path string) string {
	p, err := filepath.Abs(path)
	home, herr := os.UserHomeDir()
	isDefault := err == nil && herr == nil && p == homePath(home)
	return reaper.StateOwner(User(), p, isDefault)
}

// Load reads the state without the lock: writes replace the file
// atomically, so a reader sees one whole version. A missing file is an
// empty state.
func (s *Store) Load() (*State, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &State{Version: Version}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read state %s: %w", s.path, err)
	}
	if st.Version > Version {
		return nil, fmt.Errorf("read state %s: format version %d is newer than this boxctl's %d", s.path, st.Version, Version)
	}
	st.Version = Version
	return &st, nil
}

// Update runs fn on the current state under the state's lock and writes
// the result back atomically unless fn fails. Waiting for the lock ends
// with ctx.
func (s *Store) Update(ctx context.Context, fn func(*State) error) error {
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := s.Load()
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
func (s *Store) lock(ctx context.Context) (unlock func(), err error) { return LockFile(ctx, s.path) }

// LockFile takes the exclusive flock of path's lock file, path+".lock"
// (its directory made 0700), waiting until ctx ends: the lock of a file
// that is replaced whole, shared by the processes that change it. Callers
// in one process queue for it in turn (each is handed the lock as the one
// before lets go); the flock is polled only against other processes.
func LockFile(ctx context.Context, path string) (unlock func(), err error) {
	release, err := lockLocal(ctx, path)
	if err != nil {
		return nil, err
	}
	unlockFile, err := lockFile(ctx, path)
	if err != nil {
		release()
		return nil, err
	}
	return func() { unlockFile(); release() }, nil
}

// localLocks are the in-process locks of LockFile, by absolute path: a
// channel with room for one holder.
var localLocks sync.Map

func lockLocal(ctx context.Context, path string) (func(), error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lock state: %w", err)
	}
	v, _ := localLocks.LoadOrStore(abs, make(chan struct{}, 1))
	held := v.(chan struct{})
	select {
	case held <- struct{}{}:
		return func() { <-held }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("lock state %s: %w", path, context.Cause(ctx))
	}
}

// lockFile takes the flock of path's lock file, polling it.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	unlock, err = flock.Lock(ctx, path+".lock", 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state: %w", err)
	}
	return unlock, nil
}

// write replaces the state file with st: a 0600 temporary file in the
// same directory, synced, then renamed over it.
func (s *Store) write(st *State) error {
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

// Find returns the record of box id, or nil.
func (st *State) Find(id string) *Record {
	for i := range st.Boxes {
		if st.Boxes[i].ID == id {
			return &st.Boxes[i]
		}
	}
	return nil
}

// FindRunTag returns the record of the box with run tag tag, or nil.
func (st *State) FindRunTag(tag string) *Record {
	for i := range st.Boxes {
		if st.Boxes[i].RunTag == tag {
			return &st.Boxes[i]
		}
	}
	return nil
}

// Remove forgets the records for which drop is true and returns them.
func (st *State) Remove(drop func(*Record) bool) []Record {
	var gone []Record
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
