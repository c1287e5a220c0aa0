package bridge

import (
	"github.com/tangle-network/boxctl/bridge/harness/opencode"
	"github.com/tangle-network/boxctl/bridge/jail"
)

// ServeHelpersIfAsked runs this executable as one of the helpers a
// serving bridge starts of itself, and exits, when it was started as one:
// the net-jail relay or an exact process's launcher (package jail), or
// opencode's server relay. Otherwise it returns at once. A main that
// serves the bridge calls it first.
func ServeHelpersIfAsked() {
	jail.ServeRelayIfAsked()
	opencode.ServeRelayIfAsked()
}
