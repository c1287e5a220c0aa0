package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/open"
)

// prepare renders the build context from the pins, or takes --file.
func (o *buildOptions) prepare(a *app) (*boximage.Prepared, boximage.BuildOptions, error) {
	// boximage.Build resolves an empty --buildkit-addr ($BUILDKIT_HOST, else
	// BuildKit's default socket).
	opts := boximage.BuildOptions{
		BuildkitAddr: o.buildkitAddr, Platform: o.platform, Progress: a.errOut, ProgressMode: o.progress,
		NoCache: o.noCache, CacheFrom: o.cacheFrom, CacheTo: o.cacheTo, Insecure: o.insecure,
		BuildArgs: map[string]string{}, Log: a.log,
	}
	for _, kv := range o.buildArgs {
		k, v, _ := strings.Cut(kv, "=")
		opts.BuildArgs[k] = v
	}
	p, err := boximage.Prepare(o.source())
	if err != nil {
		return nil, opts, sourceError(err)
	}
	opts.Dockerfile, opts.ContextDir = p.Dockerfile, p.ContextDir
	return p, opts, nil
}

func (o *buildOptions) source() boximage.Source {
	return boximage.Source{File: o.file, ContextDir: o.contextDir, Harnesses: o.harnesses, Base: o.base,
		Bridge: o.bridge, Platform: o.platform}
}

// sourceError marks a source that cannot be built as given as a usage error.
func sourceError(err error) error {
	if se := (*boximage.SourceError)(nil); errors.As(err, &se) {
		return usageError{err}
	}
	return err
}

// printDockerfile writes the rendered Dockerfile to stdout (as a JSON string
// field with --output json).
func printDockerfile(a *app, o *buildOptions) error {
	_, r, err := boximage.RenderSource(o.source())
	if err != nil {
		return sourceError(err)
	}
	return a.print(map[string]string{"dockerfile": string(r.Dockerfile)}, func(w io.Writer) error {
		_, err := w.Write(r.Dockerfile)
		return err
	})
}

func runBuild(ctx context.Context, a *app, o *buildOptions) error {
	p, opts, err := o.prepare(a)
	if err != nil {
		return err
	}
	defer p.Close()
	t := boximage.PublishTarget{Target: o.target, Name: o.name, Tag: o.tag, Push: o.push, ECRRepository: o.ecrRepo,
		ECRRegion: o.ecrRegion, DockerHost: o.dockerHost, Log: a.log,
		Progress: func(line string) { fmt.Fprintf(a.errOut, "%s: %s\n", o.target, line) }}
	if o.target == boximage.TargetE2B {
		t.Resources = vendors.Resources{CPUs: float64(o.e2bCPU), MemoryBytes: int64(o.e2bMemoryMB) << 20}
	}
	if t.Importer, err = open.Importer(o.target, open.Options{Logger: a.log, E2BAPIURL: o.e2bURL, DaytonaAPIURL: o.daytonaURL}); err != nil {
		return err
	}
	rec, err := boximage.Publish(ctx, t, opts)
	if err != nil {
		return err
	}
	rememberBuild(ctx, a, rec)
	rec.Pins, rec.Harnesses = p.Pins, p.Harnesses
	return a.print(rec, rec.WriteText)
}
