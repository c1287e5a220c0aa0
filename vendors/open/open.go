package open

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// The environment variables the vendors are opened with (see the package
// documentation).
const (
	EnvE2BKey    = "E2B_API_KEY"
	EnvE2BURL    = "E2B_API_URL"
	EnvE2BDomain = "E2B_DOMAIN"
	EnvE2BDial   = "BOXCTL_E2B_DIAL"
	// EnvE2BSandboxURL is the official SDKs' one URL for all envd traffic.
	EnvE2BSandboxURL = "E2B_SANDBOX_URL"
	EnvDaytonaKey    = "DAYTONA_API_KEY"
	EnvDaytonaURL    = "DAYTONA_API_URL"
	EnvDaytonaOrg    = "DAYTONA_ORGANIZATION_ID"
	// EnvDaytonaTarget is the region the official SDKs create sandboxes in.
	EnvDaytonaTarget = "DAYTONA_TARGET"
	EnvKubeContext   = "BOXCTL_KUBE_CONTEXT"
	// EnvDockerPorts is how boxctl reaches a Docker box's ports:
	// "published" (the default: on the engine host's loopback) or
	// "direct" (at the box's address: docker.WithDirectPorts).
	EnvDockerPorts   = "BOXCTL_DOCKER_PORTS"
	EnvKubeNamespace = "BOXCTL_KUBE_NAMESPACE"
	EnvKubePool      = "BOXCTL_KUBE_POOL"
	EnvKubeHost      = "BOXCTL_KUBE_HOST_ADDRESS"
	// EnvKubeEgressRelay is an IPv4 address of this machine the cluster's
	// pods reach, where the broker serves the confined boxes' relay and
	// resolver (ports 53, 80 and 443): kubernetes.WithEgressRelay.
	EnvKubeEgressRelay = "BOXCTL_KUBE_EGRESS_RELAY"
	// EnvKubeBrokerService names the Service (namespace/name) of a
	// credential broker that runs in the cluster (boxctl broker
	// manifest): confined boxes are let reach its pods
	// (kubernetes.WithBrokerService).
	EnvKubeBrokerService = "BOXCTL_KUBE_BROKER_SERVICE"
	// EnvKubeStorageClass is the StorageClass of suspendable boxes' volumes.
	EnvKubeStorageClass = "BOXCTL_KUBE_STORAGE_CLASS"
	// EnvE2BHost and EnvDaytonaHost name this machine's address as an
	// emulator's sandboxes reach it (boxctl emulate prints them).
	EnvE2BHost     = "BOXCTL_E2B_HOST_ADDRESS"
	EnvDaytonaHost = "BOXCTL_DAYTONA_HOST_ADDRESS"
)

// Targets are the vendors Vendor opens.
var Targets = []string{docker.Name, e2b.Name, daytona.Name, kubernetes.Name}

// ConfigError is a vendor that cannot be opened as configured: an
// unknown target, a missing key, a malformed setting. A command reports it
// as a mistake in how it was called.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, args...)}
}

// Options tune Vendor.
type Options struct {
	// Logger is every vendor's logger. Default: discard.
	Logger *slog.Logger
	// Getenv reads the environment. Default: os.Getenv.
	Getenv func(string) string
	// E2BAPIURL and DaytonaAPIURL, when set, override E2B_API_URL and
	// DAYTONA_API_URL (a command's flags).
	E2BAPIURL, DaytonaAPIURL string
}

func (o Options) normalize() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	return o
}

// Closer is an opened vendor: every vendor is closed after use.
type Closer interface {
	vendors.Vendor
	Close() error
}

// CheckTarget reports, as a *ConfigError, a target Vendor does not open.
func CheckTarget(target string) error {
	if !slices.Contains(Targets, target) {
		return configErrorf("--target %q: boxes run on %s (more vendors are coming)", target, strings.Join(Targets, ", "))
	}
	return nil
}

// Vendor opens the vendor named target (one of Targets). The caller
// closes it.
func Vendor(target string, o Options) (Closer, error) {
	if err := CheckTarget(target); err != nil {
		return nil, err
	}
	var (
		v   Closer
		err error
	)
	switch target {
	case e2b.Name:
		v, err = E2B(o)
	case daytona.Name:
		v, err = Daytona(o)
	case kubernetes.Name:
		v, err = Kubernetes(o)
	default:
		v, err = Docker(o)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Docker opens the local Docker engine (DOCKER_HOST, else its socket).
func Docker(o Options) (*docker.Vendor, error) {
	o = o.normalize()
	opts := []docker.Option{docker.WithLogger(o.Logger)}
	switch p := o.Getenv(EnvDockerPorts); p {
	case "", "published":
	case "direct":
		opts = append(opts, docker.WithDirectPorts())
	default:
		return nil, configErrorf("%s=%q: ports are published or direct", EnvDockerPorts, p)
	}
	return docker.New(opts...)
}

// E2B opens the E2B client, which also publishes templates.
func E2B(o Options) (*e2b.Vendor, error) {
	o = o.normalize()
	key := o.Getenv(EnvE2BKey)
	if key == "" {
		return nil, configErrorf("--target e2b needs %s", EnvE2BKey)
	}
	opts := []e2b.Option{e2b.WithLogger(o.Logger)}
	if d := o.Getenv(EnvE2BDomain); d != "" {
		opts = append(opts, e2b.WithDomain(d))
	}
	if u := cmp.Or(o.E2BAPIURL, o.Getenv(EnvE2BURL)); u != "" {
		opts = append(opts, e2b.WithAPIURL(u))
		if pu, err := url.Parse(u); err == nil && strings.EqualFold(pu.Scheme, "http") {
			opts = append(opts, e2b.WithScheme("http"))
		}
	}
	if d := o.Getenv(EnvE2BDial); d != "" {
		opts = append(opts, e2b.WithDial(d))
	}
	if h := o.Getenv(EnvE2BHost); h != "" {
		opts = append(opts, e2b.WithHostAddress(h))
	}
	v, err := e2b.New(key, opts...)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return v, nil
}

// Daytona opens the Daytona client, which also publishes snapshots.
func Daytona(o Options) (*daytona.Vendor, error) {
	o = o.normalize()
	key := o.Getenv(EnvDaytonaKey)
	if key == "" {
		return nil, configErrorf("--target daytona needs %s", EnvDaytonaKey)
	}
	opts := []daytona.Option{daytona.WithLogger(o.Logger)}
	if u := cmp.Or(o.DaytonaAPIURL, o.Getenv(EnvDaytonaURL)); u != "" {
		opts = append(opts, daytona.WithAPIURL(u))
	}
	if org := o.Getenv(EnvDaytonaOrg); org != "" {
		opts = append(opts, daytona.WithOrganization(org))
	}
	if h := o.Getenv(EnvDaytonaHost); h != "" {
		opts = append(opts, daytona.WithHostAddress(h))
	}
	v, err := daytona.New(key, opts...)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return v, nil
}

// Kubernetes opens the Kubernetes vendor.
func Kubernetes(o Options) (*kubernetes.Vendor, error) {
	o = o.normalize()
	opts := []kubernetes.Option{kubernetes.WithLogger(o.Logger)}
	if c := o.Getenv(EnvKubeContext); c != "" {
		opts = append(opts, kubernetes.WithContext(c))
	}
	if ns := o.Getenv(EnvKubeNamespace); ns != "" {
		opts = append(opts, kubernetes.WithNamespace(ns))
	}
	if p := o.Getenv(EnvKubePool); p != "" {
		opts = append(opts, kubernetes.WithWarmPool(p))
	}
	if h := o.Getenv(EnvKubeHost); h != "" {
		opts = append(opts, kubernetes.WithHostAddress(h))
	}
	if sc := o.Getenv(EnvKubeStorageClass); sc != "" {
		opts = append(opts, kubernetes.WithStorageClass(sc))
	}
	if r := o.Getenv(EnvKubeEgressRelay); r != "" {
		addr, err := netip.ParseAddr(r)
		if err != nil || !addr.Is4() {
			return nil, &ConfigError{Err: fmt.Errorf("$%s %q: want an IPv4 address", EnvKubeEgressRelay, r)}
		}
		opts = append(opts, kubernetes.WithEgressRelay(addr))
	}
	if bs := o.Getenv(EnvKubeBrokerService); bs != "" {
		ns, name, ok := strings.Cut(bs, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, &ConfigError{Err: fmt.Errorf("$%s %q: want namespace/name of a Service", EnvKubeBrokerService, bs)}
		}
		opts = append(opts, kubernetes.WithBrokerService(ns, name))
	}
	v, err := kubernetes.New(opts...)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return v, nil
}

// Importer opens the vendor that publishes images for a build target
// (e2b, daytona), or returns nil for a target that has none.
func Importer(target string, o Options) (vendors.ImageImporter, error) {
	var (
		v   vendors.ImageImporter
		err error
	)
	switch target {
	case e2b.Name:
		v, err = E2B(o)
	case daytona.Name:
		v, err = Daytona(o)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// IsConfigError reports whether err is a *ConfigError.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}
