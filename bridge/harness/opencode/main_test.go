package opencode_test

import (
	"os"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/opencode"
)

// TestMain serves as the relay of `opencode serve` when the engine starts
// this test binary as one (its default relay is its own executable).
func TestMain(m *testing.M) {
	opencode.ServeRelayIfAsked()
	os.Exit(m.Run())
}
