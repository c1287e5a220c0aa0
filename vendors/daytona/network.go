package daytona

import (
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// maxAllowList is how many networks Daytona's allow list takes.
const maxAllowList = 5

// networkRules sets req's networkBlockAll or networkAllowList from p (not
// Open): Daytona enforces an allow list of IPv4 CIDR blocks, up to 5, with
// no port and no domain, so a policy with either is refused.
func networkRules(req *createSandbox, p egress.Policy) error {
	var allow []string
	for _, r := range p.Allow {
		if r.Domain != "" || r.Port != 0 {
			return &vendors.SpecError{Vendor: Name,
				Err: fmt.Errorf("egress rule %q: Daytona's allow list holds IPv4 CIDR blocks, with no domain and no port", r)}
		}
		allow = append(allow, r.Prefix.String())
	}
	if len(allow) > maxAllowList {
		return &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("egress: %d rules (the broker's and a workspace's among them), Daytona's allow list takes %d", len(allow), maxAllowList)}
	}
	if len(allow) == 0 {
		yes := true
		req.NetworkBlockAll = &yes
		return nil
	}
	list := strings.Join(allow, ",")
	req.NetworkAllowList = &list
	return nil
}

// EgressRules reports that Daytona's allow list names neither a domain
// nor a port.
func (v *Vendor) EgressRules() vendors.EgressRules {
	return vendors.EgressRules{MaxRules: maxAllowList}
}

var _ vendors.EgressEnforcer = (*Vendor)(nil)
