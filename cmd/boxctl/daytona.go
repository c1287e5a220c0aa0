package main

import (
	"os"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
)

// The Daytona client of the box verbs and of `boxctl build --target
// daytona`, configured from the environment:
//
//	DAYTONA_API_KEY          the account's key (required; never printed)
//	DAYTONA_API_URL          the control plane (default https://app.daytona.io/api)
//	DAYTONA_ORGANIZATION_ID  the organization, when the key is a JWT
const (
	envDaytonaKey = "DAYTONA_API_KEY"
	envDaytonaURL = "DAYTONA_API_URL"
	envDaytonaOrg = "DAYTONA_ORGANIZATION_ID"
	// envDaytonaTarget is the region the official SDKs create sandboxes in.
	envDaytonaTarget = "DAYTONA_TARGET"
)

// newDaytona returns the Daytona client; apiURL (a flag) overrides
// DAYTONA_API_URL.
func newDaytona(a *app, apiURL string) (*daytona.Vendor, error) {
	key := os.Getenv(envDaytonaKey)
	if key == "" {
		return nil, usageErrorf("--target daytona needs %s", envDaytonaKey)
	}
	opts := []daytona.Option{daytona.WithLogger(a.log)}
	if u := firstNonEmpty(apiURL, os.Getenv(envDaytonaURL)); u != "" {
		opts = append(opts, daytona.WithAPIURL(u))
	}
	if org := os.Getenv(envDaytonaOrg); org != "" {
		opts = append(opts, daytona.WithOrganization(org))
	}
	v, err := daytona.New(key, opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return v, nil
}

// daytonaImporter publishes `boxctl build --target daytona` as a Daytona
// snapshot, pushed to Daytona's own registry (vendors.ImageRegistry)
// unless --push or --ecr-repository name another.
func daytonaImporter(a *app, o *buildOptions) (vendors.ImageImporter, error) {
	return newDaytona(a, o.daytonaURL)
}
