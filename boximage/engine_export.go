package boximage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
)

// exporterMoby is the image exporter of a Docker engine's own BuildKit: it
// writes the image into the engine's image store under its names (and, on
// an engine with the containerd image store, pushes it when asked).
const exporterMoby = "moby"

// exportAttrs are the engine's image export attributes for name. The
// containerd store knows an image by its manifest digest: the export then
// reports that rather than the config digest (as docker/buildx asks).
func (e *engine) exportAttrs(name string) map[string]string {
	attrs := map[string]string{"name": name}
	if e.ContainerdStore {
		attrs["prefer-image-digest"] = "true"
	}
	return attrs
}

// engineStore is a DockerExporter on the engine's own BuildKit: the image
// is written into the engine's store as it is built, no tarball.
type engineStore struct {
	e   *engine
	tag string
}

var _ Exporter = (*engineStore)(nil)

func (x *engineStore) entry() client.ExportEntry {
	return client.ExportEntry{Type: exporterMoby, Attrs: x.e.exportAttrs(x.tag)}
}

func (x *engineStore) run(context.Context, <-chan struct{}, *error) error { return nil }

func (x *engineStore) forEngine(*engine) (Exporter, error) { return x, nil }

func (x *engineStore) result(ctx context.Context, resp *client.SolveResponse, _ authLookup) (Result, error) {
	insp, err := x.e.docker.ImageInspect(ctx, x.tag)
	if err != nil {
		return Result{}, fmt.Errorf("inspect built image %s: %w", x.tag, err)
	}
	// The engine's store knows no manifest of a build unless it is the
	// containerd store: the image id stands for it then.
	digest := resp.ExporterResponse[exptypes.ExporterImageDigestKey]
	if digest == "" {
		digest = insp.ID
	}
	return Result{Reference: x.tag, Digest: digest, ImageID: insp.ID, Size: insp.Size}, nil
}

// enginePush is a RegistryExporter on the engine's own BuildKit: the image
// goes into the engine's store under the push reference, then to the
// registry: by BuildKit's export on an engine with the containerd image
// store, by the engine's push (as `docker push`) on any other. The
// registry is the engine's to reach then: a plain-HTTP registry other
// than a loopback one must be among the engine's insecure registries.
type enginePush struct {
	*RegistryExporter
	e *engine
}

var (
	_ Exporter    = (*enginePush)(nil)
	_ pushChecker = (*enginePush)(nil)
)

func (x *enginePush) entry() client.ExportEntry {
	attrs := x.e.exportAttrs(x.ref.Name())
	if x.e.ContainerdStore {
		attrs["push"] = "true"
		if x.insecure {
			attrs["registry.insecure"] = "true"
		}
	}
	return client.ExportEntry{Type: exporterMoby, Attrs: attrs}
}

func (x *enginePush) forEngine(*engine) (Exporter, error) { return x, nil }

func (x *enginePush) result(ctx context.Context, resp *client.SolveResponse, auth authLookup) (Result, error) {
	if x.e.ContainerdStore {
		return x.RegistryExporter.result(ctx, resp, auth)
	}
	digest, err := x.push(ctx, auth)
	if err != nil {
		return Result{}, err
	}
	pushed := &client.SolveResponse{ExporterResponse: map[string]string{exptypes.ExporterImageDigestKey: digest}}
	res, err := x.RegistryExporter.result(ctx, pushed, auth)
	if err != nil {
		return Result{}, err
	}
	// The engine's image id: the config digest.
	res.ImageID = resp.ExporterResponse[exptypes.ExporterImageConfigDigestKey]
	if insp, err := x.e.docker.ImageInspect(ctx, x.ref.Name()); err == nil {
		res.ImageID = insp.ID
	}
	return res, nil
}

// push has the engine push the built image and returns the manifest digest
// the registry took.
func (x *enginePush) push(ctx context.Context, auth authLookup) (string, error) {
	a, err := auth.Resolve(x.ref.Context())
	if err != nil {
		return "", fmt.Errorf("push %s: credentials for %s: %w", x.ref, x.ref.Context().RegistryStr(), err)
	}
	cfg, err := authn.Authorization(ctx, a)
	if err != nil {
		return "", fmt.Errorf("push %s: credentials for %s: %w", x.ref, x.ref.Context().RegistryStr(), err)
	}
	secrets := secretsOf(ctx, a)
	header, err := registry.EncodeAuthConfig(registry.AuthConfig{
		Username: cfg.Username, Password: cfg.Password, Auth: cfg.Auth,
		IdentityToken: cfg.IdentityToken, RegistryToken: cfg.RegistryToken,
		ServerAddress: x.ref.Context().RegistryStr(),
	})
	if err != nil {
		return "", fmt.Errorf("push %s: %w", x.ref, err)
	}
	rc, err := x.e.docker.ImagePush(ctx, x.ref.Name(), image.PushOptions{RegistryAuth: header})
	if err != nil {
		return "", x.newPushError(err, secrets)
	}
	defer rc.Close()
	var digest string
	aux := func(m jsonmessage.JSONMessage) {
		var r struct{ Digest string }
		if m.Aux != nil && json.Unmarshal(*m.Aux, &r) == nil && r.Digest != "" {
			digest = r.Digest
		}
	}
	if err := jsonmessage.DisplayJSONMessagesStream(rc, io.Discard, 0, false, aux); err != nil {
		return "", x.newPushError(err, secrets)
	}
	if digest == "" {
		return "", x.newPushError(errors.New("the engine reported no pushed digest"), secrets)
	}
	return digest, nil
}
