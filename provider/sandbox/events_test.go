package sandbox_test

import (
	"testing"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

func TestGCEvent(t *testing.T) {
	tests := []struct {
		reaped string
		want   string
	}{
		{reaper.ReasonExpired, sandbox.ReasonDeadline},
		{reaper.ReasonOwnerGone, sandbox.ReasonGC},
		{reaper.ReasonForgotten, sandbox.ReasonGC},
	}
	for _, tc := range tests {
		ev := sandbox.GCEvent("docker", "b1", "run-x", tc.reaped)
		if ev.Type != sandbox.EventDestroyed || ev.Reason != tc.want || ev.Detail != tc.reaped || ev.BoxID != "b1" || ev.RunTag != "run-x" || ev.Time.IsZero() {
			t.Errorf("GCEvent(%q) = %+v, want destroyed for %s", tc.reaped, ev, tc.want)
		}
	}
}
