package open

import (
	"cmp"

	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/emukit"
)

// FaultSwitch returns the fault switch (emukit.SwitchPath) of the
// emulator that the environment points target's client at, as boxctl
// emulate prints it: the control plane's URL and key. It reports false
// for a target without an emulator, or an environment that names no
// control plane's URL (the vendor's own, which has no switch).
func FaultSwitch(target string, o Options) (*emukit.Switch, bool) {
	o = o.normalize()
	var u, header, value string
	switch target {
	case e2b.Name:
		u, header, value = cmp.Or(o.E2BAPIURL, o.Getenv(EnvE2BURL)), "X-API-Key", o.Getenv(EnvE2BKey)
	case daytona.Name:
		u, header, value = cmp.Or(o.DaytonaAPIURL, o.Getenv(EnvDaytonaURL)), "Authorization", "Bearer "+o.Getenv(EnvDaytonaKey)
	}
	if u == "" {
		return nil, false
	}
	sw, err := emukit.NewSwitch(u, header, value, nil)
	return sw, err == nil
}
