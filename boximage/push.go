package boximage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/buildkit/client"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/auth/authprovider"
)

// RegistryExporter pushes the image to a registry with BuildKit's image
// exporter.
type RegistryExporter struct {
	ref      name.Reference
	insecure bool
}

var _ Exporter = (*RegistryExporter)(nil)

// NewRegistryExporter pushes to ref (registry/repository:tag). insecure
// lists hosts spoken to over plain HTTP (loopback registries always are).
func NewRegistryExporter(ref string, insecure ...string) (*RegistryExporter, error) {
	var opts []name.Option
	in := isInsecure(ref, insecure)
	if in {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("push reference %q: %w", ref, err)
	}
	if _, ok := r.(name.Tag); !ok {
		return nil, fmt.Errorf("push reference %q: want a tag, not a digest", ref)
	}
	return &RegistryExporter{ref: r, insecure: in}, nil
}

func (e *RegistryExporter) entry() client.ExportEntry {
	attrs := map[string]string{"name": e.ref.Name(), "push": "true"}
	if e.insecure {
		attrs["registry.insecure"] = "true"
	}
	return client.ExportEntry{Type: client.ExporterImage, Attrs: attrs}
}

func (e *RegistryExporter) run(context.Context, <-chan struct{}, *error) error { return nil }

// result reads the pushed manifest back from the registry: the digest is
// the one the registry serves, the size what a pull downloads.
func (e *RegistryExporter) result(ctx context.Context, resp *client.SolveResponse, auth authLookup) (Result, error) {
	digest := resp.ExporterResponse[exptypes.ExporterImageDigestKey]
	if digest == "" {
		return Result{}, errors.New("push: BuildKit reported no image digest")
	}
	byDigest := e.ref.Context().Digest(digest)
	desc, err := remote.Get(byDigest, remote.WithContext(ctx), remote.WithAuthFromKeychain(auth))
	if err != nil {
		return Result{}, fmt.Errorf("push: read back %s: %w", byDigest, err)
	}
	size, err := imageSize(desc)
	if err != nil {
		return Result{}, fmt.Errorf("push: size of %s: %w", byDigest, err)
	}
	return Result{Reference: e.ref.Name() + "@" + digest, Digest: digest, Size: size}, nil
}

// imageSize sums manifest, config and layers; for an index, of every image.
func imageSize(desc *remote.Descriptor) (int64, error) {
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return 0, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return 0, err
		}
		total := desc.Size
		for _, d := range m.Manifests {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return 0, err
			}
			n, err := manifestSize(img)
			if err != nil {
				return 0, err
			}
			total += d.Size + n
		}
		return total, nil
	}
	img, err := desc.Image()
	if err != nil {
		return 0, err
	}
	n, err := manifestSize(img)
	return desc.Size + n, err
}

// manifestSize sums the config and layer sizes an image manifest lists.
func manifestSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	total := m.Config.Size
	for _, l := range m.Layers {
		total += l.Size
	}
	return total, nil
}

// isInsecure reports whether ref's host is listed, or is a loopback host.
func isInsecure(ref string, insecure []string) bool {
	host, _, _ := strings.Cut(ref, "/")
	for _, h := range insecure {
		if h == host {
			return true
		}
	}
	return strings.HasPrefix(host, "127.") || strings.HasPrefix(host, "localhost:") || host == "localhost" ||
		strings.HasPrefix(host, "[::1]")
}

// authLookup logs in to registries: the static logins by host, then the
// Docker config. It is both BuildKit's session auth provider and a
// go-containerregistry keychain.
type authLookup struct {
	static map[string]RegistryAuth
}

func newAuthLookup(static map[string]RegistryAuth) authLookup {
	return authLookup{static: static}
}

func (a authLookup) provider() session.Attachable {
	dockerCfg := authprovider.LoadAuthConfig(config.LoadDefaultConfigFile(io.Discard))
	return authprovider.NewDockerAuthProvider(authprovider.DockerAuthProviderConfig{
		AuthConfigProvider: func(ctx context.Context, host string, scope []string, check authprovider.ExpireCachedAuthCheck) (types.AuthConfig, error) {
			if l, ok := a.static[host]; ok {
				return types.AuthConfig{ServerAddress: host, Username: l.Username, Password: l.Password}, nil
			}
			return dockerCfg(ctx, host, scope, check)
		},
	})
}

// Resolve implements authn.Keychain.
func (a authLookup) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if l, ok := a.static[r.RegistryStr()]; ok {
		return &authn.Basic{Username: l.Username, Password: l.Password}, nil
	}
	return authn.DefaultKeychain.Resolve(r)
}

// forEngine pushes from the engine's store (see enginePush).
func (e *RegistryExporter) forEngine(eng *engine) (Exporter, error) {
	if e.ref == nil {
		return nil, errors.New("push: no reference (make the exporter with NewRegistryExporter)")
	}
	return &enginePush{RegistryExporter: e, e: eng}, nil
}
