package render_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"
	"github.com/tangle-network/boxctl/internal/goldentest"
	"github.com/tangle-network/boxctl/provider/sandbox"
)

func TestTimings(t *testing.T) {
	// The phases of a Docker create, their durations fixed.
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tests := []struct {
		name   string
		phases []sandbox.Phase
	}{
		{"docker_create", []sandbox.Phase{
			{Name: sandbox.PhaseChecks, Duration: ms(0.2)}, {Name: sandbox.PhaseVendor, Duration: ms(412.5)},
			{Name: sandbox.PhaseSpawn, Duration: ms(61)}, {Name: sandbox.PhaseEndpoint, Duration: ms(3.1)},
			{Name: sandbox.PhaseHealth, Duration: ms(1480)}, {Name: sandbox.PhasePins, Duration: ms(0)},
			{Name: sandbox.PhaseStatus, Duration: ms(4)}, {Name: sandbox.PhaseAttach, Duration: ms(39.2)},
		}},
		{"failed_health", []sandbox.Phase{
			{Name: sandbox.PhaseChecks, Duration: ms(0.1)}, {Name: sandbox.PhaseVendor, Duration: ms(300)},
			{Name: sandbox.PhaseSpawn, Duration: ms(50)}, {Name: sandbox.PhaseEndpoint, Duration: ms(2)},
			{Name: sandbox.PhaseHealth, Duration: ms(120000), Failed: true},
		}},
		{"none", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := render.Timings(&b, tc.phases); err != nil {
				t.Fatal(err)
			}
			goldentest.Check(t, filepath.Join("testdata", "timings_"+tc.name+".golden"), b.Bytes())
		})
	}
}
