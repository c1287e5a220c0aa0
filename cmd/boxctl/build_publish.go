package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/vendors"
)

// publishTimeout bounds waiting for a vendor to take the image in.
const publishTimeout = 30 * time.Minute

// publisher turns a build into a published image for one target: the
// image is built and pushed here, and a vendor target's ImageImporter
// (vendors/e2b, vendors/daytona) turns the pushed image into the vendor's
// own, the same library code the conformance runner publishes with. Its
// constructor checks credentials and resolves where to push before the
// (long) build starts.
type publisher struct {
	a        *app
	o        *buildOptions
	tag      string
	pushRef  string
	auth     map[string]boximage.RegistryAuth
	ecr      *boximage.ECR
	importer vendors.ImageImporter // nil for the docker and registry targets
	// pull is what the vendor pulls the pushed image with, when the
	// vendor's own registry said so (vendors.ImageRegistry).
	pull *vendors.RegistryCredentials
}

func newPublisher(ctx context.Context, a *app, o *buildOptions, tag string) (*publisher, error) {
	p := &publisher{a: a, o: o, tag: tag, auth: map[string]boximage.RegistryAuth{}}
	var err error
	switch o.target {
	case boximage.TargetE2B:
		p.importer, err = e2bImporter(a, o)
	case boximage.TargetDaytona:
		p.importer, err = daytonaImporter(a, o)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case o.target == boximage.TargetDocker:
	case o.ecrRepo != "":
		e, err := boximage.NewECR(ctx, boximage.WithECRRegion(o.ecrRegion))
		if err != nil {
			return nil, err
		}
		repo, err := e.Ensure(ctx, o.ecrRepo)
		if err != nil {
			return nil, err
		}
		if repo.Created {
			a.log.Info("created ECR repository", "repository", repo.URI)
		}
		p.ecr, p.pushRef = e, repo.URI+":"+tag
		p.auth[repo.Registry()] = repo.Auth
	case o.push != "":
		p.pushRef = withTag(o.push, tag)
	default:
		// The vendor's own registry, where it has one (Daytona's).
		reg, ok := p.importer.(vendors.ImageRegistry)
		if !ok {
			return nil, usageErrorf("--target %s needs --push REF or --ecr-repository NAME", o.target)
		}
		ref, creds, err := reg.PushTarget(ctx, o.name, tag)
		if err != nil {
			return nil, err
		}
		p.pushRef, p.pull = ref, &creds
		host, _, _ := cutHost(p.pushRef)
		p.auth[host] = boximage.RegistryAuth{Username: creds.Username, Password: creds.Password}
	}
	return p, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func cutHost(ref string) (host, rest string, ok bool) {
	for i := range len(ref) {
		if ref[i] == '/' {
			return ref[:i], ref[i+1:], true
		}
	}
	return ref, "", false
}

// referenceLabel names what Record.Reference holds for the target.
func (p *publisher) referenceLabel() string {
	switch p.o.target {
	case boximage.TargetE2B:
		return "template"
	case boximage.TargetDaytona:
		return "snapshot"
	}
	return "reference"
}

// publish builds the image into its target and returns the build record.
func (p *publisher) publish(ctx context.Context, opts boximage.BuildOptions) (boximage.Record, error) {
	opts.Auth = p.auth
	if p.o.target == boximage.TargetDocker {
		docker, err := dockerclient.New(p.o.dockerHost)
		if err != nil {
			return boximage.Record{}, err
		}
		defer docker.Close()
		exp, err := boximage.NewDockerExporter(docker, p.o.name+":"+p.tag)
		if err != nil {
			return boximage.Record{}, err
		}
		res, err := boximage.Build(ctx, opts, exp)
		if err != nil {
			return boximage.Record{}, err
		}
		return rememberBuild(ctx, p.a, boximage.NewRecord(boximage.TargetDocker, res)), nil
	}

	exp, err := boximage.NewRegistryExporter(p.pushRef, p.o.insecure...)
	if err != nil {
		return boximage.Record{}, usageError{err}
	}
	res, err := boximage.Build(ctx, opts, exp)
	if err != nil {
		return boximage.Record{}, err
	}
	target := boximage.TargetRegistry
	if p.ecr != nil {
		target = boximage.TargetECR
	}
	rec := boximage.NewRecord(target, res)
	p.a.log.Info("pushed image", "reference", res.Reference, "size", res.Size)
	if p.importer == nil {
		return rememberBuild(ctx, p.a, rec), nil
	}

	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	pull, err := p.pullCredentials(ctx)
	if err != nil {
		return boximage.Record{}, err
	}
	req := vendors.ImportRequest{Image: p.pushRef, Name: p.o.name, Tag: p.tag, Pull: pull,
		Progress: func(line string) { fmt.Fprintf(p.a.errOut, "%s: %s\n", p.o.target, line) }}
	if p.o.target == boximage.TargetE2B {
		req.Resources = vendors.Resources{CPUs: float64(p.o.e2bCPU), MemoryBytes: int64(p.o.e2bMemoryMB) << 20}
	}
	img, err := p.importer.ImportImage(ctx, req)
	if err != nil {
		return boximage.Record{}, err
	}
	fmt.Fprintf(p.a.errOut, "%s: %s %s is ready\n", p.o.target, img.Kind, img.Reference)
	rec.Target, rec.Reference = p.o.target, img.Reference
	return rememberBuild(ctx, p.a, rec), nil
}

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
