package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

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
	return p
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
