package e2b

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// allTraffic is the CIDR E2B reads as every destination.
const allTraffic = "0.0.0.0/0"

// egressRules are the egress fields of SandboxNetworkConfig and
// SandboxNetworkUpdateConfig: allowOut entries (IP, CIDR or domain, a
// domain matched by Host or SNI on ports 80 and 443) take precedence over
// denyOut entries.
type egressRules struct {
	AllowOut []string `json:"allowOut,omitempty"`
	DenyOut  []string `json:"denyOut,omitempty"`
}

// networkRules renders p (not Open) as E2B's rules: every destination
// denied but p's. E2B's rules carry no port, so a rule with one is
// refused.
func networkRules(p egress.Policy) (egressRules, error) {
	r := egressRules{DenyOut: []string{allTraffic}}
	for _, rule := range p.Allow {
		if rule.Port != 0 {
			return egressRules{}, &vendors.SpecError{Vendor: Name,
				Err: fmt.Errorf("egress rule %q: E2B's network rules name no port (an address or CIDR allows every port, a domain 80 and 443)", rule)}
		}
		r.AllowOut = append(r.AllowOut, rule.String())
	}
	return r, nil
}

// SetEgress replaces the egress rules of the running sandbox (PUT
// /sandboxes/{id}/network); E2B enforces them from outside the sandbox.
// An Open policy is refused: a box made confined stays so.
func (b *Box) SetEgress(ctx context.Context, p egress.Policy) error {
	if p.Open {
		return &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("egress: a confined sandbox cannot be opened")}
	}
	if err := p.Validate(); err != nil {
		return &vendors.SpecError{Vendor: Name, Err: err}
	}
	r, err := networkRules(p)
	if err != nil {
		return err
	}
	if _, err := b.v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPut, Path: sandboxPath(b.id, "/network"), Body: r,
		Want: http.StatusNoContent, Idempotent: true}); err != nil {
		return fmt.Errorf("e2b: network rules of %s: %w", b.id, err)
	}
	return nil
}

// EgressRules reports that E2B's rules name domains and no port.
func (v *Vendor) EgressRules() vendors.EgressRules { return vendors.EgressRules{Domains: true} }

var (
	_ vendors.EgressSetter   = (*Box)(nil)
	_ vendors.EgressEnforcer = (*Vendor)(nil)
)
