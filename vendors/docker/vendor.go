package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/docker/go-connections/nat"
	"golang.org/x/sync/singleflight"

	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Name is the vendor's name.
const Name = "docker"

// Defaults of a box's limits and network.
const (
	DefaultCPUs    = 2.0
	DefaultMemory  = 4 << 30
	DefaultPids    = 1024
	DefaultNetwork = "boxctl"
)

// Vendor creates boxes as containers on one Docker engine. It is safe for
// concurrent use; Close releases its engine connection.
type Vendor struct {
	cli  *client.Client
	opts options

	netMu sync.Mutex
	netID string
	// directOK is set once checkDirect found the boxes' network local.
	directOK bool
	// runtimes are the runtimes the engine was seen to have.
	runtimes sync.Map
	// inits are the image digests checkInit passed; initFlight shares
	// one check among concurrent creates of a reference.
	inits      sync.Map
	initFlight singleflight.Group
}

var _ vendors.Vendor = (*Vendor)(nil)

// Option configures a Vendor.
type Option func(*options)

type options struct {
	host      string
	network   string
	runtime   string
	gvisor    string
	resources vendors.Resources
	version   string
	logger    *slog.Logger
	pull      bool
	noJails   bool
	direct    bool
}

// WithHost sets the engine address (unix:///..., tcp://...). Default:
// DOCKER_HOST, else the local socket.
func WithHost(host string) Option { return func(o *options) { o.host = host } }

// WithNetwork names the Docker network boxes run on; it is created (inter-
// container traffic off) when missing. Default: DefaultNetwork.
func WithNetwork(name string) Option { return func(o *options) { o.network = name } }

// WithRuntime sets the runtime of every box, unless a create spec names
// one: vendors.RuntimeGVisor, or a runtime of the engine's (e.g. "runsc").
// Default: the engine's default runtime.
func WithRuntime(name string) Option { return func(o *options) { o.runtime = name } }

// WithGVisorRuntime names the engine's runtime that runs gVisor, which
// vendors.RuntimeGVisor selects. Default: DefaultGVisorRuntime.
func WithGVisorRuntime(name string) Option { return func(o *options) { o.gvisor = name } }

// WithDefaultResources sets the limits of a box whose spec names none.
// Default: DefaultCPUs, DefaultMemory, DefaultPids.
func WithDefaultResources(r vendors.Resources) Option {
	return func(o *options) { o.resources = r }
}

// WithVersion sets the boxctl version label of boxes. Default: this
// binary's version.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithLogger receives debug records of engine calls (never environment
// values). Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithoutPull makes Create fail when the image is not in the engine,
// instead of pulling it. Default: pull a missing image.
func WithoutPull() Option { return func(o *options) { o.pull = false } }

// WithoutJails gives boxes Docker's default seccomp profile and its
// masked /proc paths unchanged. Bubblewrap cannot build its namespaces
// under them, so the bridge in such a box refuses every jailed turn.
// Default: boxes run under the jail profile (see the package
// documentation), and jailed turns work in them.
func WithoutJails() Option { return func(o *options) { o.noJails = true } }

// WithDirectPorts reaches a box's ports at its address on the boxes'
// network instead of publishing them on the engine host's loopback: a box
// then has no port mapping, no proxy process and no NAT rules, which the
// engine makes one box at a time and a burst of creates waits on. It
// needs the engine in this machine's network namespace (a rootful engine
// on Linux: not Docker Desktop, not a rootless engine); Create refuses
// when the boxes' network is not a network of this machine's. Other
// boxes still cannot reach the ports (the network keeps inter-container
// traffic off). Default: ports are published on 127.0.0.1.
func WithDirectPorts() Option { return func(o *options) { o.direct = true } }

func makeOptions(opts []Option) options {
	defaults := vendors.Resources{CPUs: DefaultCPUs, MemoryBytes: DefaultMemory, Pids: DefaultPids}
	o := options{network: DefaultNetwork, gvisor: DefaultGVisorRuntime, version: buildinfo.Get().Version, pull: true, resources: defaults}
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	o.resources = o.resources.Or(defaults)
	return o
}

// New connects to the Docker engine.
func New(opts ...Option) (*Vendor, error) {
	o := makeOptions(opts)
	if o.network == "" || o.network == "host" || o.network == "bridge" || o.network == "none" {
		return nil, fmt.Errorf("docker vendor: network %q: boxes need a network of their own", o.network)
	}
	cli, err := dockerclient.New(o.host)
	if err != nil {
		return nil, err
	}
	return &Vendor{cli: cli, opts: o}, nil
}

// Close releases the engine connection. Boxes live on.
func (v *Vendor) Close() error { return v.cli.Close() }

// Name returns "docker".
func (v *Vendor) Name() string { return Name }

// Supports reports every create field but disk size (the engine's
// storage drivers do not bound it uniformly). An egress policy needs a
// gate on the confined network (EgressNetwork).
func (v *Vendor) Supports() vendors.Fields {
	return vendors.NewFields(vendors.FieldOwner, vendors.FieldLabels, vendors.FieldCPUs, vendors.FieldMemory,
		vendors.FieldPids, vendors.FieldEnv, vendors.FieldPorts, vendors.FieldRuntime, vendors.FieldRetention, vendors.FieldEgress)
}

// localEngine refuses an engine on another machine: boxes publish their
// ports on the engine host's loopback.
func (v *Vendor) localEngine() error {
	u, err := url.Parse(v.cli.DaemonHost())
	if err != nil || u.Scheme == "unix" || u.Scheme == "npipe" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("docker: the engine at %s is on another machine, and boxes publish their ports on its loopback only: run boxctl there, or reach it through a local socket", v.cli.DaemonHost())
}

// Network returns the name of the boxes' network.
func (v *Vendor) Network() string { return v.opts.network }

// HostAddress returns this machine's address on the boxes' network (its
// gateway), creating the network if needed: a server on the host that
// listens there is reachable from every box, and from nowhere else.
func (v *Vendor) HostAddress(ctx context.Context) (string, error) {
	if err := v.ensureNetwork(ctx); err != nil {
		return "", err
	}
	n, err := v.cli.NetworkInspect(ctx, v.netID, network.InspectOptions{})
	if err != nil {
		return "", fmt.Errorf("docker: inspect network %s: %w", v.opts.network, err)
	}
	for _, c := range n.IPAM.Config {
		if c.Gateway != "" && !strings.Contains(c.Gateway, ":") {
			return c.Gateway, nil
		}
	}
	return "", fmt.Errorf("docker: network %s has no IPv4 gateway", v.opts.network)
}

// checkDirect refuses WithDirectPorts where this machine cannot reach the
// boxes' addresses: an engine elsewhere, or a network whose gateway is
// no address of this machine's (Docker Desktop's VM, a rootless engine's
// namespace).
func (v *Vendor) checkDirect(ctx context.Context) error {
	if !v.opts.direct {
		return nil
	}
	v.netMu.Lock()
	ok := v.directOK
	v.netMu.Unlock()
	if ok {
		return nil
	}
	if err := v.localEngine(); err != nil {
		return err
	}
	gw, err := v.HostAddress(ctx)
	if err != nil {
		return err
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("docker: direct ports: this machine's addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == gw {
			v.netMu.Lock()
			v.directOK = true
			v.netMu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("docker: direct ports: the boxes' network %s (gateway %s) is not a network of this machine's: publish the ports instead (no WithDirectPorts; BOXCTL_DOCKER_PORTS=published)", v.opts.network, gw)
}

// iccOption turns inter-container traffic off on a bridge network.
const iccOption = "com.docker.network.bridge.enable_icc"

// ensureNetwork finds or creates the boxes' network and remembers its id.
// Engines before API 1.44 check duplicate names only on a best-effort
// basis, so two processes may both create one: every process then uses
// the oldest network of the name.
func (v *Vendor) ensureNetwork(ctx context.Context) error {
	v.netMu.Lock()
	defer v.netMu.Unlock()
	if v.netID != "" {
		return nil
	}
	nets, err := v.networks(ctx)
	if err == nil && len(nets) == 0 {
		_, err = v.cli.NetworkCreate(ctx, v.opts.network, network.CreateOptions{
			Driver:  "bridge",
			Labels:  map[string]string{boxmeta.LabelManaged: "true"},
			Options: map[string]string{iccOption: "false"},
		})
		if cerrdefs.IsConflict(err) || (err != nil && strings.Contains(err.Error(), "already exists")) {
			err = nil // another process made it first
		}
		if err == nil {
			nets, err = v.networks(ctx)
		}
	}
	if err != nil {
		return fmt.Errorf("docker: network %s: %w", v.opts.network, err)
	}
	if len(nets) == 0 {
		return fmt.Errorf("docker: network %s: not found after its creation", v.opts.network)
	}
	n := nets[0]
	if n.Options[iccOption] != "false" {
		return fmt.Errorf("docker: network %s lets containers reach each other (%s is not false): remove it, or name another with WithNetwork", v.opts.network, iccOption)
	}
	v.netID = n.ID
	return nil
}

// networks returns the networks named exactly like the boxes', oldest
// first.
func (v *Vendor) networks(ctx context.Context) ([]network.Summary, error) {
	all, err := v.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", v.opts.network))})
	if err != nil {
		return nil, err
	}
	var out []network.Summary
	for _, n := range all {
		if n.Name == v.opts.network {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b network.Summary) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Create starts a box. See vendors.Vendor.
func (v *Vendor) Create(ctx context.Context, spec vendors.CreateSpec) (vendors.Box, error) {
	if err := vendors.Check(v, spec); err != nil {
		return nil, err
	}
	if err := v.ensureNetwork(ctx); err != nil {
		return nil, err
	}
	if err := v.checkDirect(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	labels := vendors.Labels(spec, now, v.opts.version)
	deadline := labels[boxmeta.LabelDeadline]
	env := []string{boxmeta.EnvDeadline + "=" + deadline}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if k == boxmeta.EnvDeadline || k == boxmeta.EnvLifetime {
			return nil, &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("env %s is set from the lifetime", k)}
		}
		env = append(env, k+"="+spec.Env[k])
	}
	res := spec.Resources.Or(v.opts.resources)
	exposed, bindings := nat.PortSet{}, nat.PortMap{}
	for _, p := range spec.Ports {
		port := nat.Port(strconv.Itoa(p) + "/tcp")
		exposed[port] = struct{}{}
		if !v.opts.direct {
			bindings[port] = []nat.PortBinding{{HostIP: "127.0.0.1"}}
		}
	}
	runtime, err := v.runtime(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := v.checkInit(ctx, spec.Image); err != nil {
		return nil, err
	}
	cfg := &container.Config{Image: spec.Image, Env: env, Labels: labels, ExposedPorts: exposed}
	host := &container.HostConfig{
		AutoRemove:   true,
		NetworkMode:  container.NetworkMode(v.netID),
		PortBindings: bindings,
		CapDrop:      []string{"ALL"},
		SecurityOpt:  []string{"no-new-privileges:true"},
		Runtime:      runtime,
		Resources: container.Resources{
			NanoCPUs:  int64(res.CPUs * 1e9),
			Memory:    res.MemoryBytes,
			PidsLimit: &res.Pids,
		},
	}
	if !v.opts.noJails {
		if err := jailConfine(host); err != nil {
			return nil, err
		}
	}
	if err := v.suspendable(ctx, spec, cfg, host); err != nil {
		return nil, err
	}
	if err := v.confineEgress(ctx, spec, host); err != nil {
		return nil, err
	}
	name := "boxctl-" + spec.RunTag + "-" + strconv.FormatUint(rand.Uint64()&0xffffffffff, 36)
	created, err := v.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	if cerrdefs.IsNotFound(err) && v.opts.pull {
		if perr := v.pull(ctx, spec.Image); perr != nil {
			return nil, fmt.Errorf("docker: create box: image %s: %w", spec.Image, perr)
		}
		created, err = v.cli.ContainerCreate(ctx, cfg, host, nil, nil, name)
	}
	if err != nil {
		// The engine may have made it before the call failed, or make it
		// after (a cancelled context): remove it by name, or it would sit
		// in "created", where neither auto-remove nor the init can end it.
		if rerr := v.removeCreated(ctx, name); rerr != nil {
			return nil, &vendors.CleanupError{Vendor: Name, BoxID: name, Err: errors.Join(fmt.Errorf("docker: create box from %s: %w", spec.Image, err), rerr)}
		}
		return nil, fmt.Errorf("docker: create box from %s: %w", spec.Image, v.mapErr(err, ""))
	}
	b := v.newBox(created.ID)
	b.deadline, _ = boxmeta.ParseDeadline(deadline)
	v.opts.logger.Debug("docker box created", "id", created.ID[:12], "run", spec.RunTag, "deadline", deadline)
	fail := func(err error) (vendors.Box, error) {
		return nil, vendors.Discard(ctx, Name, created.ID, b.Destroy, err)
	}
	if spec.Retention > 0 {
		d, _ := boxmeta.ParseDeadline(deadline)
		if err := v.writeLifetime(ctx, created.ID, lifetime{Deadline: d}); err != nil {
			return fail(err)
		}
	}
	if err := v.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		box, err := fail(fmt.Errorf("docker: start box: %w", v.mapErr(err, created.ID)))
		if runtime != "" {
			// A start that failed under runsc can leave its sandbox
			// running after the engine forgot the box.
			err = errors.Join(err, v.endLeftover(context.WithoutCancel(ctx), created.ID))
		}
		return box, err
	}
	// Its state only: the lifetime file was just written.
	c, err := v.cli.ContainerInspect(ctx, created.ID)
	err = v.mapErr(err, created.ID)
	if errors.Is(err, vendors.ErrNotFound) {
		// Auto-remove took it: its init ended at once.
		return nil, fmt.Errorf("docker: box from %s ended right after its start (its init exited; the image must run box-init)", spec.Image)
	}
	if err != nil {
		return fail(fmt.Errorf("docker: start box: %w", err))
	}
	if st := stateOf(stateName(c)); st != vendors.StateRunning {
		return fail(fmt.Errorf("docker: box %s is %s right after its start", created.ID[:12], st))
	}
	return b, nil
}

// checkInit refuses an image whose entrypoint is not box-init: without it
// nothing in the box enforces the lifetime. A missing image is pulled.
func (v *Vendor) checkInit(ctx context.Context, ref string) error {
	// A digest names the same image for ever: it is checked once. A tag
	// may move: it is checked on each create, once for the creates
	// waiting on it at the same time (a burst).
	pinned := strings.Contains(ref, "@sha256:")
	if _, ok := v.inits.Load(ref); ok && pinned {
		return nil
	}
	// Shared: no one caller's cancellation ends the check of the others,
	// and each caller waits for it at most as long as its own context.
	ch := v.initFlight.DoChan(ref, func() (any, error) {
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute) // a pull, at most
		defer cancel()
		return nil, v.inspectInit(ictx, ref)
	})
	select {
	case <-ctx.Done():
		return fmt.Errorf("docker: create box: image %s: %w", ref, context.Cause(ctx))
	case r := <-ch:
		if r.Err != nil {
			return r.Err
		}
	}
	if pinned {
		v.inits.Store(ref, struct{}{})
	}
	return nil
}

// inspectInit asks the engine whether image ref runs box-init.
func (v *Vendor) inspectInit(ctx context.Context, ref string) error {
	img, err := v.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) && v.opts.pull {
		if perr := v.pull(ctx, ref); perr != nil {
			return fmt.Errorf("docker: create box: image %s: %w", ref, perr)
		}
		img, err = v.cli.ImageInspect(ctx, ref)
	}
	if err != nil {
		return fmt.Errorf("docker: create box: image %s: %w", ref, err)
	}
	if img.Config != nil {
		for _, a := range img.Config.Entrypoint {
			if path.Base(a) == boxInit {
				return nil
			}
		}
	}
	return &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("image %s does not run %s as its entrypoint, so nothing would end its boxes at their deadline", ref, boxInit)}
}

// boxInit is the box image's init (boximage), which ends the box at its
// deadline.
const boxInit = "box-init"

func (v *Vendor) pull(ctx context.Context, ref string) error {
	rc, err := v.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return err
	}
	defer rc.Close()
	return readPull(rc)
}

// Connect returns the box id (a container id or name). See
// vendors.Vendor.
func (v *Vendor) Connect(ctx context.Context, id string) (vendors.Box, error) {
	c, err := v.cli.ContainerInspect(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("docker: connect: %w", v.mapErr(err, id))
	}
	if c.Config == nil || c.Config.Labels[boxmeta.LabelManaged] != "true" {
		return nil, fmt.Errorf("docker: connect: container %s is not a boxctl box: %w", id, &vendors.NotFoundError{Vendor: Name, ID: id})
	}
	return v.newBox(c.ID), nil
}

// List returns the boxes carrying every label of filter. See
// vendors.Vendor.
func (v *Vendor) List(ctx context.Context, filter map[string]string) ([]vendors.Info, error) {
	f := filters.NewArgs(filters.Arg("label", boxmeta.LabelManaged+"=true"))
	for k, val := range filter {
		f.Add("label", k+"="+val)
	}
	cs, err := v.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list boxes: %w", v.mapErr(err, ""))
	}
	out := make([]vendors.Info, 0, len(cs))
	for _, c := range cs {
		out = append(out, v.withLifetime(ctx, info(c.ID, c.Image, stateOf(c.State), c.Labels, time.Unix(c.Created, 0))))
	}
	return out, nil
}

func info(id, img string, st vendors.State, labels map[string]string, created time.Time) vendors.Info {
	i := vendors.Info{ID: id, Vendor: Name, State: st, Image: img, Labels: labels, Created: created}
	if d, err := boxmeta.ParseDeadline(labels[boxmeta.LabelDeadline]); err == nil {
		i.Deadline = d
	}
	return i
}

// stateName is the engine's state of c ("" when it gave none).
func stateName(c container.InspectResponse) string {
	if c.State == nil {
		return ""
	}
	return c.State.Status
}

func stateOf(s string) vendors.State {
	switch s {
	case "running":
		return vendors.StateRunning
	case "created", "restarting":
		return vendors.StateCreating
	case "exited", "dead", "removing", "paused":
		return vendors.StateStopped
	}
	return vendors.StateUnknown
}

// mapErr turns engine errors into the vendors' typed errors.
func (v *Vendor) mapErr(err error, id string) error {
	return vendors.NotFound(Name, id, err, cerrdefs.IsNotFound)
}

// readPull drains an image pull's JSON progress stream and returns the
// error it reports, if any.
func readPull(r io.Reader) error {
	return jsonmessage.DisplayJSONMessagesStream(r, io.Discard, 0, false, nil)
}

// removeCreated removes the container name that a failed create may have
// made. A create cut short by ctx may still be carried out by the engine:
// its container is looked for until one is removed or vendors.Landing
// has passed.
func (v *Vendor) removeCreated(ctx context.Context, name string) error {
	wait := time.Duration(0)
	if ctx.Err() != nil {
		wait = vendors.Landing
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second+wait)
	defer cancel()
	end := time.Now().Add(wait)
	return vendors.Landed(cctx, wait, func(ctx context.Context) (bool, error) {
		err := v.cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true})
		switch {
		case err == nil:
			return true, nil
		case cerrdefs.IsConflict(err) && time.Now().Before(end):
			return false, nil // still being made, or removed by another call: again
		case cerrdefs.IsNotFound(err):
			return false, nil
		}
		return false, err
	})
}
