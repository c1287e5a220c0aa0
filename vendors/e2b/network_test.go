package e2b

import (
	"errors"
	"slices"
	"testing"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
)

func TestNetworkRules(t *testing.T) {
	for _, tc := range []struct {
		policy      string
		allow, deny []string
		refused     bool
	}{
		{policy: "", deny: []string{allTraffic}},
		{policy: "example.com,*.example.org,10.1.2.3,10.9.0.0/16", allow: []string{"example.com", "*.example.org", "10.1.2.3", "10.9.0.0/16"}, deny: []string{allTraffic}},
		{policy: "example.com:443", refused: true},
		{policy: "10.1.2.3:8443", refused: true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p, err := egress.Parse(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			r, err := networkRules(p)
			var spec *vendors.SpecError
			if tc.refused {
				if !errors.As(err, &spec) {
					t.Fatalf("networkRules(%q) = %v, want a *vendors.SpecError", tc.policy, err)
				}
				return
			}
			if err != nil || !slices.Equal(r.AllowOut, tc.allow) || !slices.Equal(r.DenyOut, tc.deny) {
				t.Errorf("networkRules(%q) = %+v, %v; want allowOut %v, denyOut %v", tc.policy, r, err, tc.allow, tc.deny)
			}
		})
	}
}
