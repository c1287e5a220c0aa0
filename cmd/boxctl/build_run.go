package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/open"
)

// prepared is what to build: the Dockerfile, its context and what it holds.
type prepared struct {
	opts      boximage.BuildOptions
	pins      *pins.Pins
	harnesses []string
	cleanup   func()
}

// prepare renders the build context from the pins, or takes --file.
func (o *buildOptions) prepare(a *app) (*prepared, error) {
	var (
		pp *pins.Pins
		r  *boximage.Rendered
	)
	if o.file == "" {
		// The harness selection is checked before anything else is looked up.
		var err error
		if pp, r, err = o.render(); err != nil {
			return nil, err
		}
	}
	// boximage.Build resolves an empty --buildkit-addr ($BUILDKIT_HOST, else
	// BuildKit's default socket).
	p := &prepared{cleanup: func() {}, opts: boximage.BuildOptions{
		BuildkitAddr: o.buildkitAddr, Platform: o.platform, Progress: a.errOut, ProgressMode: o.progress,
		NoCache: o.noCache, CacheFrom: o.cacheFrom, CacheTo: o.cacheTo, Insecure: o.insecure,
		BuildArgs: map[string]string{}, Log: a.log,
	}}
	for _, kv := range o.buildArgs {
		k, v, _ := strings.Cut(kv, "=")
		p.opts.BuildArgs[k] = v
	}
	if o.file != "" {
		df, err := os.ReadFile(o.file)
		if err != nil {
			return nil, fmt.Errorf("read --file: %w", err)
		}
		p.opts.Dockerfile, p.opts.ContextDir = df, cmp.Or(o.contextDir, filepath.Dir(o.file))
		return p, nil
	}
	bridge, err := o.bridgeBinary()
	if err != nil {
		return nil, err
	}
	dir, cleanup, err := r.Context(bridge)
	if err != nil {
		return nil, err
	}
	p.opts.Dockerfile, p.opts.ContextDir, p.pins, p.cleanup = r.Dockerfile, dir, pp, cleanup
	for _, h := range r.Harnesses {
		p.harnesses = append(p.harnesses, h.Name)
	}
	return p, nil
}

// render renders the box image from the embedded pins with --harness and
// --base applied.
func (o *buildOptions) render() (*pins.Pins, *boximage.Rendered, error) {
	pp, err := pins.Load()
	if err != nil {
		return nil, nil, err
	}
	ropts := boximage.RenderOptions{Harnesses: o.harnesses}
	if o.base != "" {
		b, err := pins.ParseBase(o.base)
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("--base: %w", err)}
		}
		ropts.Base = &b
	}
	r, err := boximage.Render(pp, ropts)
	var unknown *pins.UnknownHarnessError
	switch {
	case errors.As(err, &unknown):
		return nil, nil, usageErrorf("--harness %s: %w", unknown.Name, unknown)
	case errors.Is(err, pins.ErrNoHarness):
		return nil, nil, usageErrorf("no harness is proven yet, so there is no default set to install: "+
			"pass --harness NAME[,NAME...] (known: %s), or run the conformance suite to prove one", strings.Join(pp.HarnessNames(), ", "))
	case err != nil:
		return nil, nil, err
	}
	return pp, r, nil
}

// printDockerfile writes the rendered Dockerfile to stdout (as a JSON string
// field with --output json).
func printDockerfile(a *app, o *buildOptions) error {
	_, r, err := o.render()
	if err != nil {
		return err
	}
	return a.print(map[string]string{"dockerfile": string(r.Dockerfile)}, func(w io.Writer) error {
		_, err := w.Write(r.Dockerfile)
		return err
	})
}

func (o *buildOptions) bridgeBinary() (string, error) {
	if o.bridge != "" {
		return o.bridge, nil
	}
	exe, err := os.Executable()
	if err == nil {
		cand := filepath.Join(filepath.Dir(exe), boximage.BridgeFile)
		if _, err := os.Stat(cand); err == nil {
			return cand, nil
		}
	}
	return "", usageErrorf("no box-bridge binary next to boxctl: pass --bridge PATH (build it with `make build`)")
}

func runBuild(ctx context.Context, a *app, o *buildOptions) error {
	p, err := o.prepare(a)
	if err != nil {
		return err
	}
	defer p.cleanup()
	t := boximage.PublishTarget{Target: o.target, Name: o.name, Tag: o.tag, Push: o.push, ECRRepository: o.ecrRepo,
		ECRRegion: o.ecrRegion, DockerHost: o.dockerHost, Log: a.log,
		Progress: func(line string) { fmt.Fprintf(a.errOut, "%s: %s\n", o.target, line) }}
	if o.target == boximage.TargetE2B {
		t.Resources = vendors.Resources{CPUs: float64(o.e2bCPU), MemoryBytes: int64(o.e2bMemoryMB) << 20}
	}
	if t.Importer, err = open.Importer(o.target, open.Options{Logger: a.log, E2BAPIURL: o.e2bURL, DaytonaAPIURL: o.daytonaURL}); err != nil {
		return err
	}
	rec, err := boximage.Publish(ctx, t, p.opts)
	if err != nil {
		return err
	}
	rememberBuild(ctx, a, rec)
	rec.Pins, rec.Harnesses = p.pins, p.harnesses
	return a.print(rec, rec.WriteText)
}
