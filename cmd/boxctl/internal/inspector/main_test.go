package inspector_test

import (
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// TestMain lets the box image's bridge be built from this test binary.
func TestMain(m *testing.M) { boxbridgetest.Main(m) }
