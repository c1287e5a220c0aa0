package leftover

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
)

// running reports whether pid is a process that has not ended (a zombie
// has).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	state := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(state) > 0 && state[0] != "Z" && state[0] != "X"
}

// TestKill_LeaderExited leaves a group whose leader exited, holding a
// marked process and one whose environment is its own: Kill finds the
// marked one and ends both, and leaves an unmarked bystander alone.
func TestKill_LeaderExited(t *testing.T) {
	marker := "BOX_BRIDGE_LEFTOVER_TEST=" + strconv.Itoa(os.Getpid())
	leader := exec.Command("sh", "-c", `sleep 60 >/dev/null 2>&1 & a=$!; env -i sleep 60 >/dev/null 2>&1 & echo $a $!`)
	leader.Env = append(os.Environ(), marker)
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := leader.Output()
	if err != nil {
		t.Fatal(err)
	}
	var marked, unmarked int
	if _, err := fmt.Sscan(string(out), &marked, &unmarked); err != nil {
		t.Fatalf("leader printed %q: %v", out, err)
	}
	t.Cleanup(func() {
		syscall.Kill(marked, syscall.SIGKILL)
		syscall.Kill(unmarked, syscall.SIGKILL)
	})
	bystander := exec.Command("sleep", "60")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })

	// `env -i` holds the marker until it has exec'd its sleep with an
	// empty environment: wait for that, so that Kill counts one marked
	// process.
	polltest.Until(t, 5*time.Second, "the unmarked process to drop the marker", func() bool {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", unmarked))
		return err == nil && !strings.Contains(string(env), marker)
	})
	found := Kill("/proc", []Group{{Marker: marker, PGID: leader.Process.Pid}, {PGID: bystander.Process.Pid}})
	if found[0] != 1 || found[1] != 0 {
		t.Errorf("Kill found %v marked processes, want [1 0]", found)
	}
	polltest.UntilNil(t, 5*time.Second, "the marked and the unmarked process to end after Kill", func() error {
		if running(marked) || running(unmarked) {
			return fmt.Errorf("marked %d running %v, unmarked %d running %v", marked, running(marked), unmarked, running(unmarked))
		}
		return nil
	})
	if !running(bystander.Process.Pid) {
		t.Error("the unmarked bystander was killed")
	}
}

func TestHasEntry(t *testing.T) {
	env := []byte("A=1\x00MARK=run-1\x00B=2")
	tests := []struct {
		entry string
		want  bool
	}{
		{"MARK=run-1", true},
		{"B=2", true},
		{"MARK=run", false},
		{"MARK=run-10", false},
	}
	for _, tc := range tests {
		if got := hasEntry(env, tc.entry); got != tc.want {
			t.Errorf("hasEntry(%q) = %v, want %v", tc.entry, got, tc.want)
		}
	}
}
