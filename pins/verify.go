package pins

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"
)

// Check is the outcome of verifying one pinned npm package.
type Check struct {
	// Subject is what the package belongs to: "node" or a harness name.
	Subject string `json:"subject"`
	// Platform is set for platform packages.
	Platform string `json:"platform,omitempty"`
	// Package and Version are the pinned package.
	Package string `json:"package"`
	Version string `json:"version"`
	// Integrity is the pinned integrity.
	Integrity string `json:"integrity"`
	// Registry is the integrity the registry publishes, when it answered.
	Registry string `json:"registryIntegrity,omitempty"`
	// Error says why the check failed; empty when it passed.
	Error string `json:"error,omitempty"`
	// Fix says how to settle a failed check.
	Fix string `json:"fix,omitempty"`
}

// OK reports whether the registry publishes the pinned version with the
// pinned integrity.
func (c Check) OK() bool { return c.Error == "" }

// ErrMismatch means at least one pin disagrees with the registry.
var ErrMismatch = errors.New("pins disagree with the npm registry")

// Verify asks the registry for every pinned npm package (each harness, its
// platform packages, and Node's distributions) and compares integrity. It
// returns one Check per package in pins order. The error is a *MismatchError
// (matching ErrMismatch) when any check failed, or wraps the context's error
// when ctx ended first.
// At most four requests run at once.
func Verify(ctx context.Context, p *Pins, reg *Registry) ([]Check, error) {
	var checks []Check
	add := func(subject string, pkg Package) {
		checks = append(checks, Check{Subject: subject, Platform: pkg.Platform, Package: pkg.Name,
			Version: pkg.Version, Integrity: pkg.Integrity})
	}
	for _, h := range p.Harnesses {
		add(h.Name, Package{Name: h.Package, Version: h.Version, Integrity: h.Integrity})
		for _, pkg := range slices.Concat(h.Platforms, h.With) {
			add(h.Name, pkg)
		}
	}
	for _, pkg := range p.Node.Packages {
		add("node", pkg)
	}
	add("node", p.Node.NPM)

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range checks {
		c := &checks[i]
		g.Go(func() error {
			m, err := reg.Manifest(gctx, c.Package, c.Version)
			switch {
			case err != nil && gctx.Err() != nil:
				return gctx.Err()
			case errors.Is(err, ErrNotFound):
				c.Error = "version not in the registry"
				c.Fix = fix(c.Subject, c.Version, false)
			case err != nil:
				c.Error = err.Error()
				c.Fix = "check that the npm registry (--registry, NPM_CONFIG_REGISTRY) answers"
			case m.Version != c.Version:
				c.Error = fmt.Sprintf("registry answered version %s", m.Version)
			case m.Dist.Integrity != c.Integrity:
				c.Registry = m.Dist.Integrity
				c.Error = "integrity differs from the registry's"
				c.Fix = fix(c.Subject, c.Version, true)
			default:
				c.Registry = m.Dist.Integrity
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return checks, fmt.Errorf("verify pins: %w", err)
	}
	var failed []Check
	for _, c := range checks {
		if !c.OK() {
			failed = append(failed, c)
		}
	}
	if len(failed) > 0 {
		return checks, &MismatchError{Failed: failed, Total: len(checks)}
	}
	return checks, nil
}
