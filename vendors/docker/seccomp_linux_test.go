package docker

import (
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestJailPaths_OtherPlatforms checks that the masked paths boxctl uses
// where Docker's oci package does not build (maskedOutsideProc) are the
// oci package's, outside /proc and the CPUs' thermal_throttle.
func TestJailPaths_OtherPlatforms(t *testing.T) {
	masked, readonly := jailPaths()
	thermal := regexp.MustCompile(`^/sys/devices/system/cpu/cpu[0-9]+/thermal_throttle$`)
	masked = slices.DeleteFunc(masked, thermal.MatchString)
	if diff := cmp.Diff(maskedOutsideProc, masked); diff != "" || len(readonly) > 0 {
		t.Errorf("Docker's masked paths outside /proc (-maskedOutsideProc +oci):\n%s\nread-only outside /proc: %v, want none", diff, readonly)
	}
}
