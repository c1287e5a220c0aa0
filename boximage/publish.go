package boximage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/vendors"
)

// DefaultPublishTimeout bounds waiting for a vendor to take the image in.
const DefaultPublishTimeout = 30 * time.Minute

// PublishConfigError is a publish that cannot run as asked: no registry
// to push to, a malformed push reference. Callers report it as a mistake
// in how they were called.
type PublishConfigError struct{ Err error }

func (e *PublishConfigError) Error() string { return e.Err.Error() }
func (e *PublishConfigError) Unwrap() error { return e.Err }

// PublishTarget says where Publish puts a build.
type PublishTarget struct {
	// Target is TargetDocker, TargetRegistry, TargetE2B or TargetDaytona.
	Target string
	// Name is the image, template and snapshot name.
	Name string
	// Tag is the image tag. Default: DefaultTag of the build.
	Tag string
	// Push is the registry reference to push to (repository[:tag]); the
	// tag is added when it has none.
	Push string
	// ECRRepository is the Amazon ECR repository to push to instead,
	// created if missing, in ECRRegion (default: AWS_REGION).
	ECRRepository, ECRRegion string
	// DockerHost is the Docker engine of TargetDocker, and the one whose
	// own BuildKit builds when no buildkitd is named. Default:
	// DOCKER_HOST.
	DockerHost string
	// Importer turns the pushed image into the vendor's own (E2B
	// template, Daytona snapshot); required for a vendor target. One
	// that is a vendors.ImageRegistry also says where to push when
	// neither Push nor ECRRepository does.
	Importer vendors.ImageImporter
	// Resources are the vendor image's box resources, where it takes
	// them (E2B).
	Resources vendors.Resources
	// Progress receives the vendor's progress lines. Default: none.
	Progress func(line string)
	// Timeout bounds the vendor's import. Default:
	// DefaultPublishTimeout.
	Timeout time.Duration
	// Log receives what the publish did. Default: discard.
	Log *slog.Logger
}

// Publish builds the image with opts and publishes it to t: loaded into
// the local Docker engine, or pushed to a registry (ECR, or the vendor's
// own), then for a vendor target imported by t.Importer. Where to push
// and with what credentials is settled before the (long) build starts.
// It returns the build record; the caller adds Pins and Harnesses.
func Publish(ctx context.Context, t PublishTarget, opts BuildOptions) (Record, error) {
	if t.Log == nil {
		t.Log = slog.New(slog.DiscardHandler)
	}
	if t.Tag == "" {
		t.Tag = DefaultTag(opts)
	}
	if t.Timeout <= 0 {
		t.Timeout = DefaultPublishTimeout
	}
	p, err := newPublisher(ctx, t)
	if err != nil {
		return Record{}, err
	}
	rec, err := p.publish(ctx, opts)
	if err != nil {
		return Record{}, err
	}
	rec.Platform = opts.Platform
	return rec, nil
}

// publisher is one Publish with its push target resolved.
type publisher struct {
	t       PublishTarget
	pushRef string
	auth    map[string]RegistryAuth
	ecr     *ECR
	// pull is what the vendor pulls the pushed image with, when the
	// vendor's own registry said so (vendors.ImageRegistry).
	pull *vendors.RegistryCredentials
}

func newPublisher(ctx context.Context, t PublishTarget) (*publisher, error) {
	p := &publisher{t: t, auth: map[string]RegistryAuth{}}
	if (t.Target == TargetE2B || t.Target == TargetDaytona) && t.Importer == nil {
		return nil, &PublishConfigError{Err: fmt.Errorf("target %s: no importer", t.Target)}
	}
	switch {
	case t.Target == TargetDocker:
	case t.ECRRepository != "":
		e, err := NewECR(ctx, WithECRRegion(t.ECRRegion))
		if err != nil {
			return nil, err
		}
		repo, err := e.Ensure(ctx, t.ECRRepository)
		if err != nil {
			return nil, err
		}
		if repo.Created {
			t.Log.Info("created ECR repository", "repository", repo.URI)
		}
		p.ecr, p.pushRef = e, repo.URI+":"+t.Tag
		p.auth[repo.Registry()] = repo.Auth
	case t.Push != "":
		p.pushRef = WithTag(t.Push, t.Tag)
	default:
		// The vendor's own registry, where it has one (Daytona's).
		reg, ok := t.Importer.(vendors.ImageRegistry)
		if !ok {
			return nil, &PublishConfigError{Err: fmt.Errorf("--target %s needs --push REF or --ecr-repository NAME", t.Target)}
		}
		ref, creds, err := reg.PushTarget(ctx, t.Name, t.Tag)
		if err != nil {
			return nil, err
		}
		p.pushRef, p.pull = ref, &creds
		host, _, _ := strings.Cut(p.pushRef, "/")
		p.auth[host] = RegistryAuth{Username: creds.Username, Password: creds.Password}
	}
	return p, nil
}

// publish builds the image into its target and returns the build record.
func (p *publisher) publish(ctx context.Context, opts BuildOptions) (Record, error) {
	opts.Auth = p.auth
	if opts.DockerHost == "" {
		// Without a buildkitd, the engine of the target builds.
		opts.DockerHost = p.t.DockerHost
	}
	if p.t.Target == TargetDocker {
		docker, err := dockerclient.New(p.t.DockerHost)
		if err != nil {
			return Record{}, err
		}
		defer docker.Close()
		exp, err := NewDockerExporter(docker, p.t.Name+":"+p.t.Tag)
		if err != nil {
			return Record{}, err
		}
		res, err := Build(ctx, opts, exp)
		if err != nil {
			return Record{}, err
		}
		return NewRecord(TargetDocker, res), nil
	}

	exp, err := NewRegistryExporter(p.pushRef, opts.Insecure...)
	if err != nil {
		return Record{}, &PublishConfigError{Err: err}
	}
	res, err := Build(ctx, opts, exp)
	if err != nil {
		return Record{}, err
	}
	target := TargetRegistry
	if p.ecr != nil {
		target = TargetECR
	}
	rec := NewRecord(target, res)
	p.t.Log.Info("pushed image", "reference", res.Reference, "size", res.Size)
	if p.t.Target == TargetRegistry {
		return rec, nil
	}

	ctx, cancel := context.WithTimeout(ctx, p.t.Timeout)
	defer cancel()
	pull, err := p.pullCredentials(ctx)
	if err != nil {
		return Record{}, err
	}
	progress := p.t.Progress
	if progress == nil {
		progress = func(string) {}
	}
	req := vendors.ImportRequest{Image: p.pushRef, Name: p.t.Name, Tag: p.t.Tag, Pull: pull, Progress: progress,
		Resources: p.t.Resources}
	img, err := p.t.Importer.ImportImage(ctx, req)
	if err != nil {
		return Record{}, err
	}
	progress(fmt.Sprintf("%s %s is ready", img.Kind, img.Reference))
	rec.Target, rec.Reference = p.t.Target, img.Reference
	return rec, nil
}
