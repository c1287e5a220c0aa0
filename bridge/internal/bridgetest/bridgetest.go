// Package bridgetest gives the bridge's tests the programs they run: a
// scripted Claude Code stand-in (see bridge/internal/fakeclaude), built
// once per test binary by internal/boxbridgetest into the scratch
// directory its Main removes when the tests end, so no test leaves a
// binary behind in the system's temporary directory. The box-bridge
// binary itself comes from boxbridgetest.Build and boxbridgetest.Start.
//
// A package that uses FakeClaude runs its tests through Main:
//
//	func TestMain(m *testing.M) { bridgetest.Main(m) }
package bridgetest

import (
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness/opencode"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// Main runs a package's tests (and benchmarks) through boxbridgetest.Main,
// which gives the built binaries their scratch directory.
// A test binary started as a net jail's relay (the engine's default
// relay is its own executable) serves as one instead.
func Main(m *testing.M) {
	jail.ServeRelayIfAsked()
	opencode.ServeRelayIfAsked()
	boxbridgetest.Main(m)
}

// FakeClaude returns the path of the fakeclaude binary (named claude).
func FakeClaude(t testing.TB) string {
	t.Helper()
	return boxbridgetest.Binary(t, "bridge/internal/fakeclaude", "claude")
}
