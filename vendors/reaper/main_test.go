package reaper_test

import (
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// The live reaper test builds the box image, with a box-bridge built here.
func TestMain(m *testing.M) { boxbridgetest.Main(m) }
