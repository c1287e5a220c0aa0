package firewall

import (
	"errors"
	"fmt"
	"net/netip"
)

// ifNameSize is the kernel's bound on an interface name, its NUL included
// (IFNAMSIZ).
const ifNameSize = 16

// TablePrefix starts the name of every table this package installs.
const TablePrefix = "boxctl-egress-"

// LinkLocal is the range every confined box is denied, whatever its
// policy: the cloud metadata address 169.254.169.254 is in it.
var LinkLocal = netip.MustParsePrefix("169.254.0.0/16")

// Chain names inside the table.
const (
	ChainPrerouting = "prerouting"
	ChainInput      = "input"
	ChainForward    = "forward"
	ChainBoxes      = "boxes"
	// ChainOwner is never jumped to: its one rule's comment names the
	// process that installed the table ("pid N").
	ChainOwner = "owner"
)

// HeldError is the error of Install on a bridge whose rules another live
// process installed: its relay and resolver serve the bridge, and a
// second gate would take their place under its boxes.
type HeldError struct {
	Bridge string
	PID    int
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("firewall: bridge %s is held by process %d: one gate a confined network", e.Bridge, e.PID)
}

// Config is what the rules of one bridge let through.
type Config struct {
	// Bridge is the Linux bridge interface of the boxes' network
	// (Docker's "br-" and the first 12 characters of the network id).
	Bridge string
	// Gateway is this machine's address on the bridge, where the relay
	// and the resolver listen.
	Gateway netip.Addr
	// HTTPPort, TLSPort and DNSPort are the relay's and the resolver's
	// ports on Gateway; the boxes reach them as ports 80, 443 and 53.
	HTTPPort, TLSPort, DNSPort uint16
	// Broker is the credential broker's address (TCP), always reachable.
	Broker netip.AddrPort
}

func (c Config) validate() error {
	var errs []error
	if c.Bridge == "" || len(c.Bridge) >= ifNameSize {
		errs = append(errs, fmt.Errorf("bridge %q: want an interface name", c.Bridge))
	}
	if !c.Gateway.Is4() {
		errs = append(errs, errors.New("gateway: want an IPv4 address"))
	}
	if c.HTTPPort == 0 || c.TLSPort == 0 || c.DNSPort == 0 {
		errs = append(errs, errors.New("relay and resolver ports are required"))
	}
	if c.Broker.IsValid() && !c.Broker.Addr().Is4() {
		errs = append(errs, errors.New("broker: want an IPv4 address"))
	}
	return errors.Join(errs...)
}

// Table returns the name of bridge's table.
func Table(bridge string) string { return TablePrefix + bridge }

// Rule is one installed rule as the kernel holds it.
type Rule struct {
	// Chain is the chain the rule is in.
	Chain string
	// Comment says what the rule is for.
	Comment string
	// Dst is the destination prefix the rule matches, if any.
	Dst netip.Prefix
	// Verdict is "accept", "drop", "jump" or "" (NAT rules).
	Verdict string
}
