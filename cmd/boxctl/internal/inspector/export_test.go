package inspector

import "github.com/tangle-network/boxctl/vendors"

// ListVendor is listVendor for the external tests.
func ListVendor(infos []vendors.Info) vendors.Vendor { return listVendor{infos: infos} }
