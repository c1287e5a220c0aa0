package boxstate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// writerEnv makes the test binary a state writer: PATH,ID,N adds N
// records under the lock and exits.
const writerEnv = "BOXSTATE_TEST_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		os.Exit(writer(spec))
	}
	boxbridgetest.Main(m) // the live tests build the box image, with a box-bridge built here
}

func writer(spec string) int {
	f := strings.Split(spec, ",")
	n, _ := strconv.Atoi(f[2])
	s, err := Open(Options{Path: f[0]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := range n {
		err := s.Update(context.Background(), func(st *State) error {
			st.Boxes = append(st.Boxes, Record{ID: fmt.Sprintf("%s-%d", f[1], i), Target: "docker"})
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// TestStore_ConcurrentProcesses runs writers in processes of their own
// against each other: the flock serializes them across processes, so
// every update lands.
func TestStore_ConcurrentProcesses(t *testing.T) {
	path := useState(t)
	const procs, each = 4, 15
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path+",p"+strconv.Itoa(p)+","+strconv.Itoa(each))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	s, _ := Open(Options{Path: path})
	done := make(chan struct{})
	readErr := readUntil(s, done) // every read sees one whole version
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer: %v", err)
		}
	}
	close(done)
	if err := <-readErr; err != nil {
		t.Errorf("a reader saw a broken state: %v", err)
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Boxes) != procs*each {
		t.Errorf("state holds %d boxes after %d locked updates from %d processes", len(st.Boxes), procs*each, procs)
	}
	seen := map[string]bool{}
	for _, r := range st.Boxes {
		if seen[r.ID] {
			t.Errorf("record %s twice", r.ID)
		}
		seen[r.ID] = true
	}
}

func TestStore_Owner(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv(PathEnv, "")
	user := User()
	s, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Owner(); got != "user:"+user {
		t.Errorf("Owner() of the default state = %q, want user:%s", got, user)
	}
	a, _ := Open(Options{Path: "/a/boxes.json"})
	b, _ := Open(Options{Path: "/b/boxes.json"})
	if !strings.HasPrefix(a.Owner(), "user:"+user+"+") || a.Owner() == b.Owner() {
		t.Errorf("Owner() of two other state files = %q, %q; want the user and distinct digests", a.Owner(), b.Owner())
	}
}
