package jail

import (
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Floor is the operator's confinement floor: every turn runs at least
// this confined, whatever its execution asks. A request may raise the
// confinement above the floor (write-jail to fs-jail, or add the network
// jail), never lower it: a request below the floor runs at the floor, as
// the TypeScript bridge takes the more confined of the two. A floor this
// host cannot enforce refuses every turn it applies to (Check), it never
// runs unconfined.
type Floor struct {
	// Mode is the file-system jail every turn gets at least ("" or
	// wire.JailOff for none).
	Mode Mode
	// Net puts every turn in the network jail.
	Net bool
}

// ParseFloor reads the floor from the environment under the TypeScript
// bridge's names: BRIDGE_JAIL_MODE (off, write-jail or fs-jail) and
// BRIDGE_NET_JAIL_MODE (off or net-jail), empty meaning off and any other
// value an error, and their shorthands WORKER_FS_JAIL and WORKER_NET_JAIL,
// which raise the floor to fs-jail and net-jail when 1, true, yes or on
// (in any case).
func ParseFloor(getenv func(string) string) (Floor, error) {
	var f Floor
	switch v := getenv(wire.EnvJailMode); v {
	case "", wire.JailOff:
	case wire.JailWrite, wire.JailFS:
		f.Mode = v
	default:
		return Floor{}, fmt.Errorf("invalid %s: %s — expected off|write-jail|fs-jail", wire.EnvJailMode, v)
	}
	switch v := getenv(wire.EnvNetJailMode); v {
	case "", wire.NetJailOff:
	case wire.NetJailOn:
		f.Net = true
	default:
		return Floor{}, fmt.Errorf("invalid %s: %s — expected off|net-jail", wire.EnvNetJailMode, v)
	}
	if truthy(getenv(wire.EnvWorkerFSJail)) {
		f.Mode = wire.JailFS
	}
	if truthy(getenv(wire.EnvWorkerNetJail)) {
		f.Net = true
	}
	return f, nil
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// modeRank orders the file-system jail modes by confinement.
func modeRank(m Mode) int {
	switch m {
	case wire.JailWrite:
		return 1
	case wire.JailFS:
		return 2
	}
	return 0
}

// Raise returns r confined at least as much as f: the more confined of
// the two file-system jail modes, and the network jail when either asks
// for it. Root and the allow assertion stay r's.
func (f Floor) Raise(r Request) Request {
	if modeRank(f.Mode) > modeRank(r.Mode) {
		r.Mode = f.Mode
	}
	r.Net = r.Net || f.Net
	return r
}

// modes are the floor's modes as the capabilities report them.
func (f Floor) modes() (fs, net string) {
	fs, net = wire.JailOff, wire.NetJailOff
	if modeRank(f.Mode) > 0 {
		fs = f.Mode
	}
	if f.Net {
		net = wire.NetJailOn
	}
	return fs, net
}
