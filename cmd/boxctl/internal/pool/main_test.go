package pool_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox"
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

// child makes the parent's fixture again (its image, model endpoint and
// run tag from the environment) and runs poolChild.
func child(mode string) int {
	env, err := testbed.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f, err := sandboxtest.New(env, os.Getenv("BOXCTL_SANDBOX_IMAGE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p, err := sandbox.New(sandbox.Options{Vendor: f.Vendor, Image: f.Image, Router: sandbox.Router{URL: os.Getenv("BOXCTL_SANDBOX_ROUTER"), Key: os.Getenv("BOXCTL_SANDBOX_KEY")},
		Lifetime: 10 * time.Minute, RunTag: os.Getenv("BOXCTL_SANDBOX_RUN")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return poolChild(mode, p)
}
