package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
)

// runMainEnv makes this test binary run boxctl's main instead of the
// tests: `up --router local` starts `boxctl router-stub` from
// os.Executable, which in tests is this binary.
const runMainEnv = "BOXCTL_TEST_RUN_MAIN"

// runMainIfReexecuted runs main (which exits) in a test binary started
// with runMainEnv, and otherwise sets it for the binaries the tests start.
func runMainIfReexecuted() {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	os.Setenv(runMainEnv, "1")
}

// isolateState points the state file of every test that does not choose
// its own (useState) at a per-user scratch file, so that no test reads
// or writes the user's state: `boxctl build --target docker` records its
// image there.
func isolateState() {
	dir := filepath.Join(os.TempDir(), "boxctl-cmd-test-"+strconv.Itoa(os.Getuid()))
	os.Setenv(boxstate.PathEnv, filepath.Join(dir, "boxes.json"))
	// The brokers the tests' boxes start end soon after their last box.
	os.Setenv(brokerIdleEnv, "15s")
}

// useState points the state file at a fresh directory for one test and
// returns its path.
func useState(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "state", "boxes.json")
	t.Setenv(boxstate.PathEnv, p)
	t.Cleanup(func() { stopBroker(t) })
	return p
}

// stopBroker ends the broker the test's boxes started, if one runs: the
// gate of the confined network is one broker's at a time (another's is
// refused while it lives), and the next test has a broker of its own.
func stopBroker(t *testing.T) {
	s, err := boxstate.Open(boxstate.Options{})
	if err != nil {
		return
	}
	sock := brokerSocket(s)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("\x00--admin\x00"+sock+"\x00")) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		// t's context has ended: poll under a deadline of its own.
		ended := func() bool {
			st, err := os.ReadFile(filepath.Join(filepath.Dir(f), "stat"))
			return err != nil || bytes.Contains(st, []byte(") Z "))
		}
		tick := time.NewTicker(20 * time.Millisecond)
		deadline := time.After(10 * time.Second)
		for !ended() {
			select {
			case <-tick.C:
				continue
			case <-deadline:
				t.Errorf("the test's broker (pid %d) did not end within 10s of SIGTERM", pid)
			}
			break
		}
		tick.Stop()
	}
}

// testOwner is the owner label of the boxes of the test's state file.
func testOwner(t *testing.T) string {
	t.Helper()
	s, err := boxstate.Open(boxstate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Owner()
}
