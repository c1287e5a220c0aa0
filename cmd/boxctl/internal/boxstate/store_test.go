package boxstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

func TestDefaultPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		name, override, xdg, want string
	}{
		{"override", "/x/boxes.json", "/xdg", "/x/boxes.json"},
		{"XDG_STATE_HOME", "", "/xdg", "/xdg/boxctl/boxes.json"},
		{"home", "", "", filepath.Join(home, ".local/state/boxctl/boxes.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(PathEnv, tt.override)
			t.Setenv("XDG_STATE_HOME", tt.xdg)
			if got, err := DefaultPath(); err != nil || got != tt.want {
				t.Errorf("DefaultPath() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestStore_Update(t *testing.T) {
	path := useState(t)
	sf, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sf.Load()
	if err != nil || len(st.Boxes) != 0 {
		t.Fatalf("load() of no file = %+v, %v; want an empty state", st, err)
	}
	ref := sandbox.Reference{Vendor: "docker", BoxID: "abc123def456", Bearer: "secret-bearer", Harness: "claude-code",
		EnvironmentKey: "box-k", Deadline: time.Unix(2000000000, 0).UTC()}
	rec := Record{ID: ref.BoxID, Target: "docker", Image: "img:1", RunTag: "run-x", Created: time.Unix(1900000000, 0).UTC(),
		Deadline: ref.Deadline, Reference: &ref, Router: &localrouter.Process{PID: 42, Start: "7", URL: "http://10.0.0.1:5"}}
	if err := sf.Update(t.Context(), func(st *State) error { st.Boxes = append(st.Boxes, rec); return nil }); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("mode of %s = %v, want %v", p, fi.Mode(), want)
		}
	}
	st, err = sf.Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Record{rec}, st.Boxes); diff != "" {
		t.Errorf("state after update (-want +got):\n%s", diff)
	}
	if st.Boxes[0].Reference.Bearer != "secret-bearer" {
		t.Errorf("the state lost the bearer: the reference must keep it to reconnect")
	}

	// A failing update writes nothing.
	boom := errors.New("boom")
	if err := sf.Update(t.Context(), func(st *State) error { st.Boxes = nil; return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want %v", err, boom)
	}
	if st, _ := sf.Load(); len(st.Boxes) != 1 {
		t.Errorf("a failed update changed the state: %d boxes", len(st.Boxes))
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if e.Name() != "boxes.json" && e.Name() != "boxes.json.lock" {
			t.Errorf("state directory holds %s: a temporary file was left behind", e.Name())
		}
	}
}

// TestStore_Concurrent runs writers against each other and a reader:
// the lock makes every update land, and the rename makes every read see a
// whole state.
func TestStore_Concurrent(t *testing.T) {
	useState(t)
	sf, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 10
	var wg sync.WaitGroup
	done := make(chan struct{})
	readErr := readUntil(sf, done)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := sf.Update(t.Context(), func(st *State) error {
					st.Boxes = append(st.Boxes, Record{ID: fmt.Sprintf("box-%d-%d", w, i), Target: "docker"})
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	if err := <-readErr; err != nil {
		t.Errorf("a reader saw a broken state: %v", err)
	}
	st, err := sf.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Boxes) != writers*each {
		t.Errorf("state holds %d boxes after %d locked updates", len(st.Boxes), writers*each)
	}
}

func TestStore_LockHonoursContext(t *testing.T) {
	useState(t)
	sf, _ := Open(Options{})
	unlock, err := sf.lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err = sf.Update(ctx, func(*State) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("update while another holds the lock = %v, want the context's deadline", err)
	}
}

func TestStore_Load(t *testing.T) {
	path := useState(t)
	sf, _ := Open(Options{})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, content, wantErr string }{
		{"newer format", `{"version": 99, "boxes": []}`, "newer than this boxctl"},
		{"not JSON", `{"version"`, "read state"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := sf.Load(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Load() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestState_Resolve(t *testing.T) {
	t0 := time.Unix(1900000000, 0)
	st := &State{Boxes: []Record{
		{ID: "aaaa1111", Created: t0},
		{ID: "aaaa2222", Created: t0.Add(2 * time.Minute)},
		{ID: "bbbb3333", Created: t0.Add(time.Minute)},
		{RunTag: "run-pending", Created: t0.Add(time.Hour)}, // up still creating it
	}}
	tests := []struct {
		arg, want string
		wantCode  int    // 2 for an *ArgError, 1 for a *NoBoxError; 0 for none
		wantErr   string // substring of the error
	}{
		{arg: "aaaa1111", want: "aaaa1111"},
		{arg: "bbbb", want: "bbbb3333"},
		{arg: "aaaa2", want: "aaaa2222"},
		{arg: "last", want: "aaaa2222"},
		{arg: "aaaa", wantCode: 2, wantErr: "ambiguous"},
		{arg: "bbb", wantCode: 2, wantErr: "at least 4 characters"},
		{arg: "cccc", wantCode: 1, wantErr: "no box"},
		{arg: "", wantCode: 2, wantErr: "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			got, err := st.Resolve(tt.arg)
			if tt.wantCode == 0 {
				if err != nil || got.ID != tt.want {
					t.Fatalf("Resolve(%q) = %+v, %v; want %s", tt.arg, got, err, tt.want)
				}
				return
			}
			if err == nil || errKind(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Resolve(%q) error = %v (exit %d), want exit %d containing %q", tt.arg, err, errKind(err), tt.wantCode, tt.wantErr)
			}
		})
	}
	if _, err := (&State{}).Resolve("last"); err == nil || errKind(err) != 2 {
		t.Errorf("Resolve(last) of an empty state = %v, want a usage error", err)
	}
}

// TestStore_JSON pins the field names of the state file's format.
func TestStore_JSON(t *testing.T) {
	st := State{Version: Version, Boxes: []Record{{ID: "i", Target: "docker", Image: "m", RunTag: "r",
		Reference: &sandbox.Reference{BoxID: "i", Bearer: "b"}, Router: &localrouter.Process{PID: 1, Start: "2", URL: "u", Log: "l"}}},
		LastBuild: &LastBuild{Target: "docker", Image: "m"}}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"version":1`, `"boxes":[{"id":"i","target":"docker","image":"m","runTag":"r"`,
		`"reference":{"vendor":"","boxId":"i","endpoint":"","bearer":"b"`, `"router":{"pid":1,"start":"2","url":"u"`,
		`"lastBuild":{"target":"docker","image":"m"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("state JSON %s lacks %s", b, want)
		}
	}
}

// errKind is 2 for an *ArgError (a command's usage error), 1 for any
// other error.
func errKind(err error) int {
	var ae *ArgError
	if errors.As(err, &ae) {
		return 2
	}
	return 1
}

// useState points BOXCTL_STATE at a fresh file and returns its path.
func useState(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "state", "boxes.json")
	t.Setenv(PathEnv, p)
	return p
}

// readUntil reads the state over and over until done closes, and then
// sends the first failed read's error (or none) and closes.
func readUntil(s *Store, done <-chan struct{}) <-chan error {
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.Load(); err != nil {
				readErr <- err
				return
			}
		}
	}()
	return readErr
}

// LockFile excludes callers of one process from each other, hands the
// lock to the next one waiting when it is let go, and gives up a wait
// when its context ends.
func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	ctx := t.Context()
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			unlock, err := LockFile(ctx, path)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d callers held the lock at once, want 1", most)
	}
	unlock, err := LockFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := LockFile(wctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LockFile while held = %v, want the context's end", err)
	}
	unlock()
	again, err := LockFile(ctx, path)
	if err != nil {
		t.Fatalf("LockFile after the release = %v", err)
	}
	again()
}
