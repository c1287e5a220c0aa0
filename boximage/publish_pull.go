package boximage

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tangle-network/boxctl/vendors"
)

// pullCredentials returns what the vendor pulls the pushed image with:
// the vendor registry's own, AWS keys for ECR (vendors that speak ECR log
// in themselves), else the registry login from the Docker config, else
// none (a public image).
func (p *publisher) pullCredentials(ctx context.Context) (vendors.RegistryCredentials, error) {
	if p.pull != nil {
		return *p.pull, nil
	}
	if p.ecr != nil {
		id, secret, err := p.ecr.AccessKeys(ctx)
		if err != nil {
			return vendors.RegistryCredentials{}, err
		}
		return vendors.RegistryCredentials{AWSAccessKeyID: id, AWSSecretAccessKey: secret, AWSRegion: p.ecr.Region()}, nil
	}
	ref, err := name.ParseReference(p.pushRef)
	if err != nil {
		return vendors.RegistryCredentials{}, err
	}
	if l, ok := p.auth[ref.Context().RegistryStr()]; ok {
		return vendors.RegistryCredentials{Username: l.Username, Password: l.Password}, nil
	}
	auth, err := authn.DefaultKeychain.Resolve(ref.Context())
	if err != nil {
		return vendors.RegistryCredentials{}, fmt.Errorf("registry login for %s: %w", ref.Context().RegistryStr(), err)
	}
	cfg, err := authn.Authorization(ctx, auth)
	if err != nil {
		return vendors.RegistryCredentials{}, fmt.Errorf("registry login for %s: %w", ref.Context().RegistryStr(), err)
	}
	if cfg.Username == "" || cfg.Password == "" {
		if cfg.IdentityToken != "" || cfg.RegistryToken != "" {
			return vendors.RegistryCredentials{}, errors.New("the vendor needs a username and password for the registry, not a token")
		}
		return vendors.RegistryCredentials{}, nil
	}
	return vendors.RegistryCredentials{Username: cfg.Username, Password: cfg.Password}, nil
}
