package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/e2b"
)

// publishTimeout bounds waiting for a vendor to take the image in.
const publishTimeout = 30 * time.Minute

// publisher turns a build into a published image for one target. Its
// constructor checks credentials and resolves where to push before the
// (long) build starts.
type publisher struct {
	a       *app
	o       *buildOptions
	tag     string
	pushRef string
	auth    map[string]boximage.RegistryAuth
	ecr     *boximage.ECR
	e2b     *e2b.TemplateClient
	daytona *daytona.SnapshotClient
}

func newPublisher(ctx context.Context, a *app, o *buildOptions, tag string) (*publisher, error) {
	p := &publisher{a: a, o: o, tag: tag, auth: map[string]boximage.RegistryAuth{}}
	switch o.target {
	case boximage.TargetE2B:
		key := os.Getenv("E2B_API_KEY")
		if key == "" {
			return nil, usageErrorf("--target e2b needs E2B_API_KEY")
		}
		c, err := e2b.NewTemplateClient(key, e2b.WithTemplateBaseURL(e2bAPIURL(o.e2bURL)), e2b.WithTemplateLogger(a.log))
		if err != nil {
			return nil, err
		}
		p.e2b = c
	case boximage.TargetDaytona:
		key := os.Getenv("DAYTONA_API_KEY")
		if key == "" {
			return nil, usageErrorf("--target daytona needs DAYTONA_API_KEY")
		}
		u := firstNonEmpty(o.daytonaURL, os.Getenv("DAYTONA_API_URL"), daytona.DefaultAPIURL)
		c, err := daytona.NewSnapshotClient(key, daytona.WithSnapshotBaseURL(u),
			daytona.WithSnapshotOrganization(os.Getenv("DAYTONA_ORGANIZATION_ID")), daytona.WithSnapshotLogger(a.log))
		if err != nil {
			return nil, err
		}
		p.daytona = c
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
	case o.target == boximage.TargetDaytona:
		pa, err := p.daytona.RegistryPushAccess(ctx)
		if err != nil {
			return nil, err
		}
		p.pushRef = pa.Repository(path.Base(o.name)) + ":" + tag
		host, _, _ := cutHost(p.pushRef)
		p.auth[host] = boximage.RegistryAuth{Username: pa.Username, Password: pa.Secret}
	}
	return p, nil
}

func e2bAPIURL(flag string) string {
	if u := firstNonEmpty(flag, os.Getenv("E2B_API_URL")); u != "" {
		return u
	}
	if d := os.Getenv("E2B_DOMAIN"); d != "" {
		return "https://api." + d
	}
	return e2b.DefaultAPIURL
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
		return rememberDockerBuild(ctx, p.a, boximage.NewRecord(boximage.TargetDocker, res)), nil
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

	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	switch p.o.target {
	case boximage.TargetE2B:
		reg, err := p.e2bRegistry(ctx)
		if err != nil {
			return boximage.Record{}, err
		}
		ref, err := p.e2b.BuildFromImage(ctx,
			e2b.TemplateRequest{Name: p.o.name, CPUCount: p.o.e2bCPU, MemoryMB: p.o.e2bMemoryMB},
			e2b.BuildStart{FromImage: p.pushRef, FromImageRegistry: reg},
			func(e e2b.LogEntry) { fmt.Fprintf(p.a.errOut, "e2b: %s\n", e.Message) })
		if err != nil {
			if ref.TemplateID != "" {
				return boximage.Record{}, fmt.Errorf("e2b template %s: %w", ref.TemplateID, err)
			}
			return boximage.Record{}, err
		}
		rec.Target, rec.Reference = boximage.TargetE2B, ref.TemplateID
	case boximage.TargetDaytona:
		snap, err := p.daytona.CreateSnapshot(ctx, daytona.CreateSnapshot{
			Name: path.Base(p.o.name) + "-" + p.tag, ImageName: p.pushRef})
		if err != nil {
			return boximage.Record{}, err
		}
		fmt.Fprintf(p.a.errOut, "daytona: snapshot %s is %s\n", snap.Name, snap.State)
		snap, err = p.daytona.WaitSnapshot(ctx, snap.Name)
		if err != nil {
			return boximage.Record{}, err
		}
		fmt.Fprintf(p.a.errOut, "daytona: snapshot %s is %s\n", snap.Name, snap.State)
		rec.Target, rec.Reference = boximage.TargetDaytona, snap.Name
	}
	return rec, nil
}

// e2bRegistry returns the credentials E2B pulls the pushed image with: AWS
// keys for ECR (E2B logs in to ECR itself), else the registry login from
// the Docker config, else none (a public image).
func (p *publisher) e2bRegistry(ctx context.Context) (*e2b.Registry, error) {
	if p.ecr != nil {
		id, secret, err := p.ecr.AccessKeys(ctx)
		if err != nil {
			return nil, err
		}
		return &e2b.Registry{Type: "aws", AWSAccessKeyID: id, AWSSecretAccessKey: secret, AWSRegion: p.ecr.Region()}, nil
	}
	ref, err := name.ParseReference(p.pushRef)
	if err != nil {
		return nil, err
	}
	if l, ok := p.auth[ref.Context().RegistryStr()]; ok {
		return &e2b.Registry{Type: "registry", Username: l.Username, Password: l.Password}, nil
	}
	auth, err := authn.DefaultKeychain.Resolve(ref.Context())
	if err != nil {
		return nil, fmt.Errorf("registry login for %s: %w", ref.Context().RegistryStr(), err)
	}
	cfg, err := authn.Authorization(ctx, auth)
	if err != nil {
		return nil, fmt.Errorf("registry login for %s: %w", ref.Context().RegistryStr(), err)
	}
	if cfg.Username == "" || cfg.Password == "" {
		if cfg.IdentityToken != "" || cfg.RegistryToken != "" {
			return nil, errors.New("e2b needs a username and password for the registry, not a token")
		}
		return nil, nil
	}
	return &e2b.Registry{Type: "registry", Username: cfg.Username, Password: cfg.Password}, nil
}
