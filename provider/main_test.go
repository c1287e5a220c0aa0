package provider_test

import (
	"testing"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
)

// TestMain gives the box-bridge binary the live tests run a scratch
// directory removed at the end.
func TestMain(m *testing.M) { boxbridgetest.Main(m) }
