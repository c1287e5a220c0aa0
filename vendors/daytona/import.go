package daytona

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"

	"github.com/tangle-network/boxctl/vendors"
)

// PushTarget returns where to push the box image name:tag so that Daytona
// can make a snapshot of it: {registryUrl}/{project}/{base of name}:tag in
// Daytona's own registry, with the temporary credentials
// GET /docker-registry/registry-push-access hands out. See
// vendors.ImageRegistry.
func (v *Vendor) PushTarget(ctx context.Context, name, tag string) (string, vendors.RegistryCredentials, error) {
	if name == "" || tag == "" {
		return "", vendors.RegistryCredentials{}, errors.New("daytona: push target: name and tag are required")
	}
	pa, err := v.RegistryPushAccess(ctx)
	if err != nil {
		return "", vendors.RegistryCredentials{}, fmt.Errorf("daytona: %w", err)
	}
	return pa.Repository(path.Base(name)) + ":" + tag, vendors.RegistryCredentials{Username: pa.Username, Password: pa.Secret}, nil
}

// SnapshotName is the snapshot ImportImage makes of an image called name
// (its last path element) with tag: "{name}-{tag}", or name without a
// tag. Daytona refuses a snapshot named with ":latest".
func SnapshotName(name, tag string) string {
	n := path.Base(name)
	if tag != "" {
		n += "-" + tag
	}
	return n
}

// ImportImage makes a snapshot of the pushed image (POST /snapshots) and
// waits until Daytona has pulled it and it is active; the error and
// build_failed states end the wait with a *SnapshotFailedError carrying
// Daytona's reason. Daytona pulls from its own registry (PushTarget), or
// from a registry the organization has configured: req.Pull is not sent.
// See vendors.ImageImporter.
func (v *Vendor) ImportImage(ctx context.Context, req vendors.ImportRequest) (vendors.ImportedImage, error) {
	if req.Image == "" || req.Name == "" {
		return vendors.ImportedImage{}, errors.New("daytona: import image: image and name are required")
	}
	name := SnapshotName(req.Name, req.Tag)
	out := vendors.ImportedImage{Kind: "snapshot"}
	snap, err := v.CreateSnapshot(ctx, CreateSnapshot{Name: name, ImageName: req.Image,
		CPU: int(math.Ceil(req.Resources.CPUs)), Memory: ceilGiB(req.Resources.MemoryBytes), Disk: ceilGiB(req.Resources.DiskBytes)})
	if err != nil {
		return out, fmt.Errorf("daytona: %w", err)
	}
	out.Reference = snap.Name
	snap, err = v.waitSnapshot(ctx, snap.Name, req.Progress)
	if err != nil {
		return out, fmt.Errorf("daytona: %w", err)
	}
	return out, nil
}
