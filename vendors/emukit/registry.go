package emukit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

// RegistryOptions configure a Registry. The zero value works.
type RegistryOptions struct {
	// DockerHost is the engine the boxes run on. Default DOCKER_HOST,
	// else the local socket.
	DockerHost string
	// Network is the Docker network of the boxes. Default
	// docker.DefaultNetwork.
	Network string
	// Log receives the Docker vendor's records. Default discards.
	Log *slog.Logger
	// Runtime is the runtime of the boxes, as the Docker vendor's
	// WithRuntime takes it (vendors.RuntimeGVisor: each sandbox under
	// gVisor). Default the engine's.
	Runtime string
	// EgressResolver resolves the names confined sandboxes may reach
	// (their relay's and resolver's lookups). Default: this machine's
	// resolver.
	EgressResolver *net.Resolver
}

// Registry is the set of Docker boxes behind an emulator's sandboxes, by
// sandbox id: made through the Docker vendor, frozen and thawed as the
// vendor's pauses, removed at once (their processes killed) when their
// sandbox ends, and every one left removed on Close.
type Registry struct {
	opts   RegistryOptions
	docker *docker.Vendor
	engine *client.Client
	log    *slog.Logger

	mu       sync.Mutex
	boxes    map[string]vendors.Box
	confined map[string]netip.Addr // the confined sandboxes' addresses

	gateMu sync.Mutex
	gate   *gate.Gate // of the confined network, once a sandbox needed it
	// egressMu orders the changes of confined sandboxes' rules at the
	// gate (confine, SetEgress, forget).
	egressMu sync.Mutex
}

// NewRegistry connects to the engine of opts. Close it.
func NewRegistry(opts RegistryOptions) (*Registry, error) {
	if opts.Network == "" {
		opts.Network = docker.DefaultNetwork
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	dv, err := docker.New(docker.WithHost(opts.DockerHost), docker.WithNetwork(opts.Network), docker.WithLogger(opts.Log),
		docker.WithRuntime(opts.Runtime))
	if err != nil {
		return nil, err
	}
	engine, err := dockerclient.New(opts.DockerHost)
	if err != nil {
		dv.Close()
		return nil, err
	}
	return &Registry{opts: opts, docker: dv, engine: engine, log: opts.Log, boxes: map[string]vendors.Box{},
		confined: map[string]netip.Addr{}}, nil
}

// Engine returns the engine client, for what the emulator asks of the
// engine itself (execs, archives, images).
func (g *Registry) Engine() *client.Client { return g.engine }

// Network returns the Docker network of the boxes.
func (g *Registry) Network() string { return g.docker.Network() }

// HostAddress returns this machine's address on the boxes' network (its
// gateway): a server listening there is reachable from every sandbox.
func (g *Registry) HostAddress(ctx context.Context) (string, error) { return g.docker.HostAddress(ctx) }

// Create makes the box of a sandbox and returns it with its address on
// the boxes' network. A box that has no address is removed again. A spec
// with an egress policy that is not Open puts the box on the confined
// network, its policy held by this process's gate of that network before
// Create returns.
func (g *Registry) Create(ctx context.Context, sandboxID string, spec vendors.CreateSpec) (vendors.Box, string, error) {
	confine := spec.Egress != nil && !spec.Egress.Open
	if confine {
		if _, err := g.egressGate(ctx); err != nil {
			return nil, "", err
		}
	}
	box, err := g.docker.Create(ctx, spec)
	if err != nil {
		return nil, "", err
	}
	ip, err := g.address(ctx, box.ID())
	if err == nil && confine {
		var addr netip.Addr
		if addr, err = netip.ParseAddr(ip); err == nil {
			err = g.confine(ctx, sandboxID, addr, *spec.Egress)
		}
	}
	if err != nil {
		g.forget(context.WithoutCancel(ctx), sandboxID)
		_ = box.Destroy(context.WithoutCancel(ctx))
		return nil, "", err
	}
	g.mu.Lock()
	g.boxes[sandboxID] = box
	g.mu.Unlock()
	return box, ip, nil
}

// address returns the container's address on the boxes' network (else
// on its only one).
func (g *Registry) address(ctx context.Context, containerID string) (string, error) {
	c, err := g.engine.ContainerInspect(ctx, containerID)
	if err != nil {
		return "", fmt.Errorf("inspect the sandbox's container: %w", err)
	}
	if c.NetworkSettings != nil {
		if n, ok := c.NetworkSettings.Networks[g.Network()]; ok && n.IPAddress != "" {
			return n.IPAddress, nil
		}
		for _, n := range c.NetworkSettings.Networks {
			if n.IPAddress != "" {
				return n.IPAddress, nil
			}
		}
	}
	return "", fmt.Errorf("container %.12s has no address on network %s", containerID, g.Network())
}

// Box returns the box of a sandbox.
func (g *Registry) Box(sandboxID string) (vendors.Box, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	box, ok := g.boxes[sandboxID]
	return box, ok
}

// Freeze pauses the container of a sandbox: its processes and memory
// stay as they are until Thaw. The engine's freezer gives up on a busy
// container now and then (a process in an uninterruptible wait): a pause
// that failed is tried again until ctx ends, and the container is left
// running (not half frozen) if it never succeeds.
func (g *Registry) Freeze(ctx context.Context, sandboxID string) error {
	box, ok := g.Box(sandboxID)
	if !ok {
		return fmt.Errorf("sandbox %s has no container", sandboxID)
	}
	wait := 50 * time.Millisecond
	for {
		err := g.engine.ContainerPause(ctx, box.ID())
		if err == nil {
			return nil
		}
		if c, ierr := g.engine.ContainerInspect(ctx, box.ID()); ierr == nil && c.State != nil {
			switch {
			case c.State.Paused:
				return nil
			case !c.State.Running:
				return fmt.Errorf("freeze sandbox %s: its container is %s: %w", sandboxID, c.State.Status, err)
			}
		}
		g.log.Debug("emulator: pause failed, again", "sandbox", sandboxID, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("freeze sandbox %s: %w", sandboxID, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Thaw resumes the frozen container of a sandbox and returns once the
// engine reports it running and not paused: a container the engine still
// reports paused is unpaused again until ctx ends, and one that no longer
// runs is an error naming its state.
func (g *Registry) Thaw(ctx context.Context, sandboxID string) error {
	box, ok := g.Box(sandboxID)
	if !ok {
		return fmt.Errorf("sandbox %s has no container", sandboxID)
	}
	wait := 20 * time.Millisecond
	for {
		err := g.engine.ContainerUnpause(ctx, box.ID())
		c, ierr := g.engine.ContainerInspect(ctx, box.ID())
		switch {
		case ierr != nil:
			return fmt.Errorf("thaw sandbox %s: %w", sandboxID, errors.Join(err, ierr))
		case c.State == nil || !c.State.Running:
			status := "gone"
			if c.State != nil {
				status = c.State.Status
			}
			return fmt.Errorf("thaw sandbox %s: its container is %s", sandboxID, status)
		case !c.State.Paused:
			return nil
		}
		g.log.Debug("emulator: container still paused, unpause again", "sandbox", sandboxID, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("thaw sandbox %s: still paused: %w", sandboxID, errors.Join(err, ctx.Err()))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Remove removes the container of a sandbox, if it has one: thawed if
// frozen and killed first, so its processes end at once, as a host's do
// when it goes.
func (g *Registry) Remove(ctx context.Context, sandboxID string) error {
	g.mu.Lock()
	box, ok := g.boxes[sandboxID]
	delete(g.boxes, sandboxID)
	g.mu.Unlock()
	if !ok {
		return nil
	}
	// First: an address freed by the destroy may go to a new box.
	g.forget(ctx, sandboxID)
	if c, err := g.engine.ContainerInspect(ctx, box.ID()); err == nil && c.State != nil && c.State.Paused {
		_ = g.engine.ContainerUnpause(ctx, box.ID())
	}
	_ = g.engine.ContainerKill(ctx, box.ID(), "KILL")
	return box.Destroy(ctx)
}

// Close removes every container left and releases the engine.
func (g *Registry) Close() error {
	return errors.Join(g.RemoveAll(), g.releaseGate(), g.engine.Close(), g.docker.Close())
}

// RemoveAll removes every container left; the registry stays usable.
func (g *Registry) RemoveAll() error {
	g.mu.Lock()
	ids := make([]string, 0, len(g.boxes))
	for id := range g.boxes {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = g.Remove(ctx, id) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// NamedImages reads the NAME=IMAGE values of a repeated flag (an
// emulator's templates or snapshots to start with).
func NamedImages(flag string, kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		name, img, ok := strings.Cut(kv, "=")
		if !ok || name == "" || img == "" {
			return nil, fmt.Errorf("%s %q: want NAME=IMAGE", flag, kv)
		}
		out[name] = img
	}
	return out, nil
}
