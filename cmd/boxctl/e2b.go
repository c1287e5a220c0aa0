package main

import (
	"net/url"
	"os"
	"strings"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/e2b"
)

// The E2B client of the box verbs and of `boxctl build --target e2b`,
// configured from the environment:
//
//	E2B_API_KEY      the account's key (required; never printed)
//	E2B_API_URL      the control plane (default https://api.$E2B_DOMAIN)
//	E2B_DOMAIN       the sandboxes' domain (default e2b.app)
//	BOXCTL_E2B_DIAL  host:port to connect every request for the domain to,
//	                 as curl's --resolve does (for `boxctl emulate e2b`)
//
// A plain-HTTP control plane means plain-HTTP sandbox URLs too.
const (
	envE2BKey    = "E2B_API_KEY"
	envE2BURL    = "E2B_API_URL"
	envE2BDomain = "E2B_DOMAIN"
	envE2BDial   = "BOXCTL_E2B_DIAL"
	// envE2BSandboxURL is the official SDKs' one URL for all envd traffic.
	envE2BSandboxURL = "E2B_SANDBOX_URL"
)

// newE2B returns the E2B client; apiURL (a flag) overrides E2B_API_URL.
func newE2B(a *app, apiURL string) (*e2b.Vendor, error) {
	key := os.Getenv(envE2BKey)
	if key == "" {
		return nil, usageErrorf("--target e2b needs %s", envE2BKey)
	}
	opts := []e2b.Option{e2b.WithLogger(a.log)}
	if d := os.Getenv(envE2BDomain); d != "" {
		opts = append(opts, e2b.WithDomain(d))
	}
	if u := firstNonEmpty(apiURL, os.Getenv(envE2BURL)); u != "" {
		opts = append(opts, e2b.WithAPIURL(u))
		if pu, err := url.Parse(u); err == nil && strings.EqualFold(pu.Scheme, "http") {
			opts = append(opts, e2b.WithScheme("http"))
		}
	}
	if d := os.Getenv(envE2BDial); d != "" {
		opts = append(opts, e2b.WithDial(d))
	}
	v, err := e2b.New(key, opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return v, nil
}

// e2bImporter publishes `boxctl build --target e2b` as an E2B template.
func e2bImporter(a *app, o *buildOptions) (vendors.ImageImporter, error) {
	return newE2B(a, o.e2bURL)
}
