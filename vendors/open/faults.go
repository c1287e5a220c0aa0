package open

import (
	"cmp"

	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/e2b"
)

// ControlPlane is where a vendor's control plane is and the header that
// authenticates a call to it. Value is a secret.
type ControlPlane struct{ URL, Header, Value string }

// EmulatorControlPlane returns the control plane that the environment
// points target's client at, as boxctl emulate prints it: the URL and the
// key's header, which also reach that emulator's fault switch (package
// emukit). It reports false for a target without an emulator, or an
// environment that names no control plane's URL (the vendor's own, which
// has no switch).
func EmulatorControlPlane(target string, o Options) (ControlPlane, bool) {
	o = o.normalize()
	var cp ControlPlane
	switch target {
	case e2b.Name:
		cp = ControlPlane{cmp.Or(o.E2BAPIURL, o.Getenv(EnvE2BURL)), "X-API-Key", o.Getenv(EnvE2BKey)}
	case daytona.Name:
		cp = ControlPlane{cmp.Or(o.DaytonaAPIURL, o.Getenv(EnvDaytonaURL)), "Authorization", "Bearer " + o.Getenv(EnvDaytonaKey)}
	}
	return cp, cp.URL != ""
}
