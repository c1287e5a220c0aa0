package pool_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
)

// The fixture the live tests share (internal/sandboxtest).
type (
	fixture = sandboxtest.Fixture
	target  = sandboxtest.Target
)

var (
	setup    = sandboxtest.Setup
	randText = sandboxtest.RandText
	claude   = sandboxtest.Claude
)

// The two-process tests run this test binary again as a keeper or a
// claimer of a pool (poolChild), with childVar set to the mode.
const childVar = "BOXCTL_POOL_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(pool.TakeHelperEnv); dir != "" {
		os.Exit(pool.TakeHelper(dir))
	}
	if mode := os.Getenv(childVar); mode != "" {
		os.Exit(child(mode))
	}
	boxbridgetest.Main(m)
}

// child makes the parent's fixture's provider again (ChildEnv) and runs
// poolChild.
func child(mode string) int {
	p, err := sandboxtest.ChildProvider()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return poolChild(mode, p)
}
