package main

import (
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// TestMain gives the box-bridge binary the image tests build a scratch
// directory removed at the end. A re-executed test binary runs boxctl's
// main instead (see runMainIfReexecuted), no test touches the user's
// state file (see isolateState), and client-go is as quiet as in boxctl.
func TestMain(m *testing.M) {
	quietClientGo()
	runMainIfReexecuted()
	isolateState()
	boxbridgetest.Main(m)
}
