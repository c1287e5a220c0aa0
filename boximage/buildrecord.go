package boximage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/go-units"

	"github.com/tangle-network/boxctl/pins"
)

// Targets an image is published to.
const (
	TargetDocker   = "docker"
	TargetRegistry = "registry"
	TargetECR      = "ecr"
	TargetE2B      = "e2b"
	TargetDaytona  = "daytona"
)

// Record describes one published box image: what `boxctl build --output
// json` prints and `boxctl conformance` reads to know what to test.
type Record struct {
	// Target is docker, registry, ecr, e2b or daytona.
	Target string `json:"target"`
	// Reference is what a vendor starts boxes from: the Docker tag, the
	// registry reference pinned by digest, the E2B template id or the
	// Daytona snapshot name.
	Reference string `json:"reference"`
	// Image is the image the reference was made from: the Docker tag or
	// the pushed reference pinned by digest.
	Image string `json:"image"`
	// Digest is the image manifest digest.
	Digest string `json:"digest"`
	// ImageID is the image config digest, when known.
	ImageID string `json:"imageID,omitempty"`
	// Size is the image size in bytes (see Result.Size).
	Size int64 `json:"size"`
	// Platform is the platform built for, if one was asked.
	Platform string `json:"platform,omitempty"`
	// Harnesses lists the harness CLIs the image holds.
	Harnesses []string `json:"harnesses,omitempty"`
	// Pins are the pinned versions the image was rendered from.
	Pins *pins.Pins `json:"pins,omitempty"`
	// BuiltAt is when the build finished.
	BuiltAt time.Time `json:"builtAt"`
	// BuildSeconds is how long build and export took.
	BuildSeconds float64 `json:"buildSeconds"`
}

// NewRecord fills a record from a build result; the caller sets Target and
// Reference for targets past the image itself.
func NewRecord(target string, res Result) Record {
	return Record{
		Target: target, Reference: res.Reference, Image: res.Reference, Digest: res.Digest,
		ImageID: res.ImageID, Size: res.Size, BuiltAt: time.Now().UTC(),
		BuildSeconds: res.Duration.Seconds(),
	}
}

// Validate reports a record that names no target, reference or digest.
func (r Record) Validate() error {
	switch r.Target {
	case TargetDocker, TargetRegistry, TargetECR, TargetE2B, TargetDaytona:
	default:
		return fmt.Errorf("build record: unknown target %q", r.Target)
	}
	if r.Reference == "" || r.Image == "" {
		return errors.New("build record: no reference or image")
	}
	if r.Digest == "" {
		return errors.New("build record: no digest")
	}
	return nil
}

// ReadRecord decodes and validates a build record.
func ReadRecord(rd io.Reader) (Record, error) {
	var r Record
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return Record{}, fmt.Errorf("read build record: %w", err)
	}
	if err := r.Validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// vendorKubernetes is the Kubernetes vendor's name (kubernetes.Name): its
// clusters pull what a registry holds.
const vendorKubernetes = "kubernetes"

// TargetFor is the build target whose image boxes on vendor start from:
// the vendor's own, but a registry's for Kubernetes.
func TargetFor(vendor string) string {
	if vendor == vendorKubernetes {
		return TargetRegistry
	}
	return vendor
}

// VendorMismatchError is a build record whose image a vendor cannot start
// boxes from.
type VendorMismatchError struct {
	Target, Vendor string
}

func (e *VendorMismatchError) Error() string {
	return fmt.Sprintf("is of target %s: build one for %s", e.Target, e.Vendor)
}

// CheckVendor reports, as a *VendorMismatchError, a record whose
// reference boxes on vendor cannot start from: a record of the vendor's
// own target suits it, and a pushed image (registry, ECR) suits the
// vendors that pull from registries (Docker, Kubernetes).
func (r Record) CheckVendor(vendor string) error {
	switch {
	case r.Target == vendor:
	case (vendor == TargetDocker || vendor == vendorKubernetes) && (r.Target == TargetRegistry || r.Target == TargetECR):
	default:
		return &VendorMismatchError{Target: r.Target, Vendor: vendor}
	}
	return nil
}

// ReferenceKind names what Reference holds for the record's target:
// template (E2B), snapshot (Daytona), else reference.
func (r Record) ReferenceKind() string {
	switch r.Target {
	case TargetE2B:
		return "template"
	case TargetDaytona:
		return "snapshot"
	}
	return "reference"
}

// WriteText writes the record for people, a line per field: target,
// image, digest, size, the reference when it is not the image (named by
// ReferenceKind) and how long the build took.
func (r Record) WriteText(w io.Writer) error {
	lines := [][2]string{{"target", r.Target}, {"image", r.Image}, {"digest", r.Digest},
		{"size", fmt.Sprintf("%s (%d bytes)", units.HumanSize(float64(r.Size)), r.Size)}}
	if r.Reference != r.Image {
		lines = append(lines, [2]string{r.ReferenceKind(), r.Reference})
	}
	lines = append(lines, [2]string{"took", fmt.Sprintf("%.1fs", r.BuildSeconds)})
	for _, l := range lines {
		if _, err := fmt.Fprintf(w, "%-9s%s\n", l[0], l[1]); err != nil {
			return err
		}
	}
	return nil
}
