package baseimage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Config describes the image around its root filesystem layer. The zero
// value gives an image with no environment, entrypoint or labels.
type Config struct {
	// Env is the image environment, e.g. "PATH=/usr/local/bin:/usr/bin:/bin".
	Env []string
	// Entrypoint is the image entrypoint, e.g. ["/usr/bin/tini", "--"].
	Entrypoint []string
	// Cmd is the default command.
	Cmd []string
	// Labels are the image labels.
	Labels map[string]string
	// CreatedBy is recorded in the layer's history entry.
	CreatedBy string
}

// epoch is the creation time recorded in every image: fixed, so the config
// (and with it the digest) depends only on the inputs.
var epoch = v1.Time{Time: time.Unix(0, 0).UTC()}

// FromLayer returns a linux/amd64 image whose only layer is the tar archive
// at path. A gzip-compressed archive is used as the layer blob as is; an
// uncompressed one is compressed on the fly.
func FromLayer(path string, cfg Config) (v1.Image, error) {
	layer, err := tarball.LayerFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("read layer %s: %w", path, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: epoch, CreatedBy: cfg.CreatedBy},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	cf.OS = "linux"
	cf.Created = epoch
	cf.Config.Env = append([]string(nil), cfg.Env...)
	cf.Config.Entrypoint = append([]string(nil), cfg.Entrypoint...)
	cf.Config.Cmd = append([]string(nil), cfg.Cmd...)
	if len(cfg.Labels) > 0 {
		cf.Config.Labels = maps.Clone(cfg.Labels)
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

// ErrNoTag means Push was given no tag to write.
var ErrNoTag = errors.New("push: no tag given")

// Push writes img under each tag (the first receives the blobs, the others
// only the manifest) and returns the image digest. Registries on loopback
// are spoken to over plain HTTP.
func Push(ctx context.Context, img v1.Image, tags []name.Tag, opts ...remote.Option) (v1.Hash, error) {
	if len(tags) == 0 {
		return v1.Hash{}, ErrNoTag
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image digest: %w", err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	if err := remote.Write(tags[0], img, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", tags[0], err)
	}
	for _, t := range tags[1:] {
		if err := remote.Tag(t, img, opts...); err != nil {
			return v1.Hash{}, fmt.Errorf("tag %s: %w", t, err)
		}
	}
	return digest, nil
}
