package daytona

import (
	"errors"
	"testing"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
)

func TestNetworkRules(t *testing.T) {
	for _, tc := range []struct {
		policy    string
		blockAll  bool
		allowList string
		refused   bool
	}{
		{policy: "", blockAll: true},
		{policy: "10.1.2.3,10.9.0.0/16", allowList: "10.1.2.3/32,10.9.0.0/16"},
		{policy: "example.com", refused: true},
		{policy: "10.1.2.3:443", refused: true},
		{policy: "10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5,10.0.0.6", refused: true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p, err := egress.Parse(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			var req createSandbox
			err = networkRules(&req, p)
			if tc.refused {
				var spec *vendors.SpecError
				if !errors.As(err, &spec) {
					t.Fatalf("networkRules(%q) = %v, want a *vendors.SpecError", tc.policy, err)
				}
				return
			}
			gotBlock := req.NetworkBlockAll != nil && *req.NetworkBlockAll
			gotList := ""
			if req.NetworkAllowList != nil {
				gotList = *req.NetworkAllowList
			}
			if err != nil || gotBlock != tc.blockAll || gotList != tc.allowList {
				t.Errorf("networkRules(%q) = block %v, list %q, %v; want %v, %q", tc.policy, gotBlock, gotList, err, tc.blockAll, tc.allowList)
			}
		})
	}
}
