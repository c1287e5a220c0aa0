package vendors

import (
	"context"
	"fmt"
)

// ImageImporter turns a box image pushed to an OCI registry into the
// vendor's own kind of image (an E2B template, a Daytona snapshot): what
// CreateSpec.Image names on that vendor. boximage.Publish, which `boxctl
// build` runs, publishes through it.
//
// ImportImage returns once the vendor's image is usable (its build or
// pull finished), or with the vendor's reason when it failed; ctx bounds
// the wait. The returned ImportedImage names the vendor's image even with
// an error when the vendor made one, so the caller can report or remove
// it.
type ImageImporter interface {
	ImportImage(ctx context.Context, req ImportRequest) (ImportedImage, error)
}

// ImageRegistry is implemented by an ImageImporter whose vendor hosts the
// registry images are pushed to (Daytona's own registry): PushTarget
// returns where to push the image name:tag and the credentials to push
// (and pull) with. Callers ask for it before the build, and pass the
// credentials back in ImportRequest.Pull.
type ImageRegistry interface {
	PushTarget(ctx context.Context, name, tag string) (ref string, creds RegistryCredentials, err error)
}

// ImportRequest is a pushed image to import.
type ImportRequest struct {
	// Image is the pushed reference the vendor pulls
	// (registry/repository:tag, or @digest). Required.
	Image string
	// Name names the vendor's image (a template or snapshot name,
	// repository-like without a tag). Required.
	Name string
	// Tag is the image's tag, for vendors whose names carry it (a
	// Daytona snapshot is name-tag); empty means none.
	Tag string
	// Pull holds the credentials the vendor pulls Image with; the zero
	// value means a public image.
	Pull RegistryCredentials
	// Resources are the defaults of boxes made from the image where the
	// vendor fixes them at import (E2B: CPUs and MemoryBytes); zero
	// fields mean the vendor's defaults.
	Resources Resources
	// Progress receives the vendor's build log, one line per call, in
	// order; nil discards it.
	Progress func(line string)
}

// RegistryCredentials let a vendor pull from (or push to) a registry:
// a username and password, or AWS keys for an ECR registry, which
// vendors that speak to ECR natively (E2B) use to log in themselves.
type RegistryCredentials struct {
	Username, Password string
	// AWSAccessKeyID, AWSSecretAccessKey and AWSRegion name an ECR
	// registry's owner.
	AWSAccessKeyID, AWSSecretAccessKey, AWSRegion string
}

// IsZero reports no credentials.
func (c RegistryCredentials) IsZero() bool { return c == RegistryCredentials{} }

// String names the kind of credentials only: secrets never print.
func (c RegistryCredentials) String() string {
	switch {
	case c.AWSAccessKeyID != "":
		return fmt.Sprintf("aws credentials (%s)", c.AWSRegion)
	case c.Username != "":
		return "registry login as " + c.Username
	}
	return "no credentials"
}

// ImportedImage is a vendor's image made by ImportImage.
type ImportedImage struct {
	// Reference is what CreateSpec.Image takes on this vendor (a template
	// ID, a snapshot name).
	Reference string
	// Kind names what Reference is, for people: "template", "snapshot".
	Kind string
}
