package docker

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/system"

	"github.com/tangle-network/boxctl/vendors"
)

// DefaultGVisorRuntime is the name a Docker engine usually gives gVisor's
// runtime (dockerd --add-runtime runsc=/usr/local/bin/runsc).
const DefaultGVisorRuntime = "runsc"

// runtime resolves the runtime a box is asked to run with (the spec's,
// else the vendor's) to the engine's name of it, and checks that the
// engine has it: "" is the engine's default. A suspendable box under
// gVisor needs runsc to write the box's files to the container's layer
// (--overlay2=none): by default it keeps them in an overlay of its own,
// which a stop discards.
func (v *Vendor) runtime(ctx context.Context, spec vendors.CreateSpec) (string, error) {
	name, err := v.engineRuntime(ctx, spec.Runtime)
	if err != nil || name == "" || spec.Retention == 0 {
		return name, err
	}
	got, _ := v.runtimes.Load(name)
	rt, _ := got.(system.Runtime)
	gvisor := name == v.opts.gvisor || filepath.Base(rt.Path) == "runsc"
	if gvisor && !slices.Contains(rt.Args, "--overlay2=none") {
		return "", &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("runtime %q: a suspendable box under gVisor needs its files on the container's layer, "+
			"which a stop keeps: register runsc with \"runtimeArgs\": [\"--overlay2=none\"] (its arguments: %q)", name, rt.Args)}
	}
	return name, nil
}

func (v *Vendor) engineRuntime(ctx context.Context, asked string) (string, error) {
	name := cmp.Or(asked, v.opts.runtime)
	if name == vendors.RuntimeGVisor {
		name = v.opts.gvisor
	}
	if name == "" {
		return "", nil
	}
	if _, ok := v.runtimes.Load(name); ok {
		return name, nil
	}
	info, err := v.cli.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("docker: runtimes of the engine: %w", err)
	}
	for r, rt := range info.Runtimes {
		v.runtimes.Store(r, rt.Runtime)
	}
	if _, ok := info.Runtimes[name]; ok {
		return name, nil
	}
	have := slices.Sorted(maps.Keys(info.Runtimes))
	hint := ""
	if name == v.opts.gvisor {
		hint = fmt.Sprintf("; for gVisor, install runsc (gvisor.dev) and register it with the engine: "+
			`"runtimes": {"%s": {"path": "/usr/local/bin/runsc"}} in its daemon.json, then reload it (SIGHUP)`, name)
	}
	return "", &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("runtime %q: the engine at %s has no such runtime (it has %s)%s",
		name, v.cli.DaemonHost(), strings.Join(have, ", "), hint)}
}
