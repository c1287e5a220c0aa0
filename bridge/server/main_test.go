package server

import (
	"testing"

	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
)

// TestMain builds the test programs into a scratch directory removed at
// the end.
func TestMain(m *testing.M) { bridgetest.Main(m) }
