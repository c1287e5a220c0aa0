package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// ImageSource says where the image under test comes from, in this order:
// a build record file, an image reference, or the user's last build for
// the vendor's target.
type ImageSource struct {
	// BuildRecord is the path of a `boxctl build --record` file.
	BuildRecord string
	// Image is an image reference.
	Image string
	// Vendor is the vendor's name (docker, e2b, ...).
	Vendor string
	// Last is the user's last build, or nil.
	Last *Built
}

// Built is an image a build made for a target (docker, e2b, ...).
type Built struct {
	Target string
	Image  string
	// Digest is "" when unknown.
	Digest string
}

// Image is the image a suite runs against.
type Image struct {
	Reference string
	// Digest is "" when unknown.
	Digest string
	// Harnesses are the harnesses a build record says the image holds.
	Harnesses []string
}

// ImageError is an image source that names no usable image.
type ImageError struct{ Err error }

func (e *ImageError) Error() string { return e.Err.Error() }
func (e *ImageError) Unwrap() error { return e.Err }

func imageErrorf(format string, args ...any) error {
	return &ImageError{fmt.Errorf(format, args...)}
}

// ResolveImage finds the image of src, and its digest: from the record,
// the reference's own digest, or (on Docker) the local engine's; an
// unknown digest is "" and logged.
func ResolveImage(ctx context.Context, src ImageSource, log *slog.Logger) (Image, error) {
	var img Image
	switch {
	case src.BuildRecord != "":
		f, err := os.Open(src.BuildRecord)
		if err != nil {
			return Image{}, imageErrorf("--build-record: %w", err)
		}
		defer f.Close()
		rec, err := boximage.ReadRecord(f)
		if err != nil {
			return Image{}, imageErrorf("--build-record %s: %w", src.BuildRecord, err)
		}
		if err := rec.CheckVendor(src.Vendor); err != nil {
			return Image{}, imageErrorf("--build-record %s %w", src.BuildRecord, err)
		}
		return Image{Reference: rec.Reference, Digest: rec.Digest, Harnesses: rec.Harnesses}, nil
	case src.Image != "":
		img.Reference = src.Image
	default:
		target := boximage.TargetFor(src.Vendor)
		if src.Last == nil || src.Last.Target != target {
			return Image{}, imageErrorf("no box image: pass --image REF or --build-record FILE, or build one with `boxctl build --target %s`", target)
		}
		img.Reference, img.Digest = src.Last.Image, src.Last.Digest
	}
	if _, d, ok := strings.Cut(img.Reference, "@"); ok && img.Digest == "" {
		img.Digest = d
	}
	if img.Digest == "" && src.Vendor == docker.Name {
		// "" when the engine does not know the image: the vendor pulls
		// it, and the report names no digest.
		d, err := boximage.LocalDigest(ctx, "", img.Reference)
		if err != nil && log != nil {
			log.Debug("image digest unknown", "image", img.Reference, "err", err)
		}
		img.Digest = d
	}
	return img, nil
}
