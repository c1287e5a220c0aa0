package daytonaemu

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/tangle-network/boxctl/vendors/egress"
)

// maxAllowList is how many networks Daytona's allow list takes.
const maxAllowList = 5

// networkPolicy reads a create's networkBlockAll and networkAllowList as
// Daytona validates them (the allow list: up to 5 comma-separated IPv4
// CIDR blocks, each with its prefix length) and returns the sandbox's
// egress policy: networkBlockAll reaches nothing, an allow list reaches
// its blocks only (TCP), neither leaves the sandbox open (nil).
func networkPolicy(blockAll *bool, allowList *string) (*egress.Policy, error) {
	var p egress.Policy
	if allowList != nil {
		var n int
		for _, e := range strings.Split(*allowList, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			n++
			addr, _, ok := strings.Cut(e, "/")
			ip, err := netip.ParseAddr(addr)
			if err != nil || !ip.Is4() {
				return nil, fmt.Errorf("Invalid IP address: %q in network %q. Must be a valid IPv4 address", addr, e)
			}
			if !ok {
				return nil, fmt.Errorf("Invalid network format: %q. Missing CIDR prefix length (e.g., /24)", e)
			}
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("Invalid CIDR prefix length: %s. Prefix must be between 0 and 32", e)
			}
			p.Allow = append(p.Allow, egress.Rule{Prefix: pfx.Masked()})
		}
		if n > maxAllowList {
			return nil, fmt.Errorf("Network allow list cannot contain more than %d networks", maxAllowList)
		}
	}
	switch {
	case blockAll != nil && *blockAll:
		return &egress.Policy{}, nil
	case len(p.Allow) > 0:
		return &p, nil
	default:
		return nil, nil
	}
}
