package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
	"regexp"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localbroker"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

func runUp(ctx context.Context, a *app, o *upOptions) error {
	s, err := a.openState()
	if err != nil {
		return err
	}
	if err := o.lastImage(a); err != nil {
		return err
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()

	now := time.Now()
	rec := boxstate.Record{Target: o.target, Image: o.image, RunTag: sandbox.NewRunTag(), Created: now.UTC(), Deadline: now.Add(o.lifetime).UTC()}
	up := o.up
	if o.router == routerLocal {
		lr, key, err := startRouterFor(ctx, s, rec.RunTag, now.Add(o.lifetime+o.retention+routerMargin))
		if err != nil {
			return err
		}
		rec.Router = lr
		up = broker.Upstream{Name: "local-" + strings.ToLower(rec.RunTag), URL: lr.URL, Key: key, Auth: broker.AuthAsPresented,
			Transient: true}
		a.log.Info("local model endpoint started", "url", lr.URL, "pid", lr.PID)
	}
	access, err := a.upstreamAccess(ctx, s, v, up, o.brokerURL)
	if err != nil {
		return err
	}
	rec.Upstream, rec.BrokerURL, rec.BrokerCA, rec.Webhooks, rec.Egress = up.Name, o.brokerURL, string(o.brokerCA), o.webhooks, o.egress
	access.BrokerCA = o.brokerCA
	defer localbroker.KeepAwake(ctx, access.Broker, localbroker.KeepAwakeEvery)()
	var gate sandbox.EgressGate
	if e, own := v.(vendors.EgressEnforcer); o.confined() && (!own || e.EgressRules().Relay) {
		if gate, err = a.egressGate(ctx, s, v, access.BrokerURL); err != nil {
			return o.egressHint(err)
		}
	}
	var (
		phases  []sandbox.Phase
		outcome pool.Outcome
	)
	rec, err = s.Create(ctx, v, rec, func(ctx context.Context, tag string) (sandbox.Reference, error) {
		env, how, err := createBox(ctx, a, v, o, tag, s.Owner(), access, gate, s.Record)
		if err != nil {
			return sandbox.Reference{}, o.egressHint(err)
		}
		phases, outcome = env.Timings(), how
		ref := env.Reference()
		_ = env.Close(context.WithoutCancel(ctx))
		return ref, nil
	})
	if err != nil {
		return err
	}
	return printUp(a, o, rec, phases, outcome)
}

// egressHint adds to an error of confining the box (a gate that could
// not start, a vendor that cannot say the policy) that --egress open is
// the way to an open box, when the box is denied by default.
func (o *upOptions) egressHint(err error) error {
	var u *vendors.UnsupportedError
	var spec *vendors.SpecError
	var held *firewall.HeldError
	egressErr := errors.Is(err, docker.ErrEgressUnenforced) || errors.As(err, &held) ||
		(errors.As(err, &u) && u.Field == vendors.FieldEgress) || (errors.As(err, &spec) && strings.Contains(spec.Error(), "egress"))
	if err == nil || !o.confined() || len(o.allow) > 0 || !egressErr && !errors.As(err, new(*gate.APIError)) {
		return err
	}
	return fmt.Errorf("%w (the box's egress is denied by default; --egress open lets it reach anything)", err)
}

// poolable reports whether up's box may come from a pool: a pooled box
// is not suspendable, its bridge trusts the certificate authorities it
// booted with (a --broker-ca cannot reach it at the claim), and a
// confined one is Docker's (whose gate a claim gives the box's policy).
func (o *upOptions) poolable() bool {
	return !o.noPool && o.retention == 0 && o.idle == 0 && len(o.brokerCA) == 0 && (!o.confined() || o.target == docker.Name)
}

// poolName is the pool up's box is claimed from.
func (o *upOptions) poolName() string {
	name := pool.DefaultName(o.target, o.harness, o.image, o.runtime)
	if o.confined() {
		name += pool.ConfinedSuffix
	}
	return name
}

// resolveRuntime checks --runtime and --runtime-class, and takes the
// class as the box's runtime.
func (o *upOptions) resolveRuntime() error {
	switch {
	case o.class != "" && o.runtime != "":
		return usageErrorf("--runtime-class and --runtime: give one (a RuntimeClass is the runtime of a Kubernetes box)")
	case o.class != "" && o.target != kubernetes.Name:
		return usageErrorf("--runtime-class %q: only --target kubernetes runs boxes under a RuntimeClass (--runtime gvisor is the Docker engine's)", o.class)
	case o.class != "":
		o.runtime = o.class
	}
	if o.runtime != "" && !runtimeName.MatchString(o.runtime) {
		return usageErrorf("--runtime %q: want gvisor or a runtime name (lower-case letters, digits, '.', '-' and '_')", o.runtime)
	}
	return nil
}

// runtimeName is what an engine's runtime or a RuntimeClass may be named.
var runtimeName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// createBox makes the box through the sandbox provider.
func createBox(ctx context.Context, a *app, v vendors.Vendor, o *upOptions, tag, owner string, access boxstate.ModelAccess, gate sandbox.EgressGate, onEvent func(sandbox.Event)) (*sandbox.Environment, pool.Outcome, error) {
	var bridgeEnv map[string]string
	if o.bridgeOTLP != "" {
		bridgeEnv = map[string]string{tracing.EndpointEnv: o.bridgeOTLP}
	}
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: o.image, Broker: access.Broker, BrokerURL: access.BrokerURL, BrokerCA: access.BrokerCA,
		Upstream: access.Upstream, Lifetime: o.lifetime, Retention: o.retention, Runtime: o.runtime,
		IdleSuspend: o.idle, RunTag: tag, Owner: owner, Logger: a.log, OnEvent: onEvent, BridgeEnv: bridgeEnv,
		Egress: o.egress, EgressGate: gate})
	if err != nil {
		return nil, "", err
	}
	req := sandbox.CreateRequest{Profile: provider.Profile{Harness: o.harness, Model: provider.ProfileModel{Default: o.model}},
		Lifetime: o.lifetime}
	if o.repo != "" {
		req.Workspace = &sandbox.WorkspaceRepo{RepoURL: o.repo, GitRef: o.gitRef}
	}
	a.log.Info("creating box", "target", o.target, "image", o.image, "harness", o.harness, "lifetime", o.lifetime)
	// A box waiting in the pool of this target, harness and image is
	// claimed (boxctl pool up); else, or with --no-pool, one is created.
	var env *sandbox.Environment
	outcome := pool.Cold
	if !o.poolable() {
		env, err = p.Create(ctx, req)
	} else {
		env, outcome, err = pool.For(v, "").Claim(ctx, p, o.poolName(), req)
	}
	a.log.Debug("box", "pool", outcome)
	if errors.Is(err, pins.ErrUnknownHarness) {
		return nil, "", usageError{err}
	}
	return env, outcome, err
}
