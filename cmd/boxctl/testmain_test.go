package main

import (
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// TestMain gives the box-bridge binary the image tests build a scratch
// directory removed at the end. A re-executed test binary runs boxctl's
// main instead (see runMainIfReexecuted), and no test touches the user's
// state file (see isolateState).
func TestMain(m *testing.M) {
	runMainIfReexecuted()
	isolateState()
	boxbridgetest.Main(m)
}
