package docker

import (
	"context"
	"fmt"

	"github.com/tangle-network/boxctl/internal/dockerclient"
)

// Inspect returns everything the engine shows of box id to anyone with
// access to it: the container's inspect data and that of every exec of it
// the engine still has, ended ones too. A caller checks it for secrets (the
// conformance suite's box.secrets case does).
func (v *Vendor) Inspect(ctx context.Context, id string) ([]byte, error) {
	raw, _, err := dockerclient.Inspect(ctx, v.cli, id)
	if err != nil {
		return nil, fmt.Errorf("docker: inspect: %w", v.mapErr(err, id))
	}
	return raw, nil
}
