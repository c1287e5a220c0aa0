package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	agents "sigs.k8s.io/agent-sandbox/clients/k8s/clientset/versioned"
	extensions "sigs.k8s.io/agent-sandbox/clients/k8s/extensions/clientset/versioned"

	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// Name is the vendor's name.
const Name = "kubernetes"

// Defaults of a box's limits, requests and start-up.
const (
	DefaultCPUs          = 2.0
	DefaultMemory        = 4 << 30
	DefaultRequestCPUs   = 0.1
	DefaultRequestMemory = 256 << 20
	DefaultRequestDisk   = 1 << 30
	DefaultReadyTimeout  = 5 * time.Minute
	// DefaultGrace is the pod's termination grace period in seconds: the
	// box's init ends everything at once on SIGTERM.
	DefaultGrace = 5
)

// ContainerName is the name of the box's container in its pod.
const ContainerName = "box"

// LabelsAnnotation holds every label of a box as JSON (boxmeta's
// included): Kubernetes label values cannot hold all of them (an owner has
// colons), so only the pairs that fit are also Kubernetes labels, for
// selection, and this annotation is what Info.Labels comes from.
const LabelsAnnotation = boxmeta.LabelPrefix + "labels"

// Vendor creates boxes as agent-sandbox Sandboxes in one namespace of a
// cluster. It is safe for concurrent use; Close ends the port-forwards it
// holds (boxes live on).
type Vendor struct {
	cfg    *rest.Config
	core   k8s.Interface
	agents agents.Interface
	ext    extensions.Interface
	ns     string
	o      options

	mu       sync.Mutex
	forwards map[forwardKey]*forwarder
	closed   bool
	// served are the API groups discovery found at APIVersion.
	served map[string]bool
	// baseline: BaselinePolicy is known to exist (egress.go).
	baseline bool
	// brokerPeer: the egress rule to the broker's pods (brokerpeer.go).
	brokerPeer *networkingv1.NetworkPolicyEgressRule
}

var (
	_ vendors.Vendor    = (*Vendor)(nil)
	_ vendors.WarmPools = (*Vendor)(nil)
)

// Option configures a Vendor.
type Option func(*options)

type options struct {
	kubeconfig   string
	context      string
	namespace    string
	rest         *rest.Config
	resources    vendors.Resources
	requests     vendors.Resources
	version      string
	logger       *slog.Logger
	readyTimeout time.Duration
	pool         string
	grace        int64
	hostAddr     string
	storageClass string
	relay        netip.Addr
	brokerSvc    [2]string // namespace, name
}

// WithKubeconfig reads the cluster's coordinates from path. Default: as
// kubectl finds them ($KUBECONFIG, ~/.kube/config), else the in-cluster
// service account when running in a pod.
func WithKubeconfig(path string) Option { return func(o *options) { o.kubeconfig = path } }

// WithContext picks a kubeconfig context. Default: the current one.
func WithContext(name string) Option { return func(o *options) { o.context = name } }

// WithNamespace sets the namespace of the boxes. Default: the context's
// namespace (in a pod: its own), else "default".
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithRESTConfig uses cfg instead of a kubeconfig (and WithNamespace or
// "default" for the namespace).
func WithRESTConfig(cfg *rest.Config) Option { return func(o *options) { o.rest = cfg } }

// WithDefaultResources sets the limits of a box whose spec names none.
// Default: DefaultCPUs, DefaultMemory, no disk limit.
func WithDefaultResources(r vendors.Resources) Option {
	return func(o *options) { o.resources = r }
}

// WithRequests sets what the scheduler reserves for each box (Kubernetes
// requests); limits come from the spec. Default: DefaultRequestCPUs,
// DefaultRequestMemory, so that many idle boxes fit on a node.
func WithRequests(r vendors.Resources) Option { return func(o *options) { o.requests = r } }

// WithVersion sets the boxctl version label of boxes. Default: this
// binary's version.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithLogger receives debug records of API calls (never environment
// values). Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithReadyTimeout bounds the wait for a new box to be Ready (its image
// pulled, its pod running). Default: DefaultReadyTimeout.
func WithReadyTimeout(d time.Duration) Option { return func(o *options) { o.readyTimeout = d } }

// WithWarmPool makes Create claim a pre-warmed box from the
// SandboxWarmPool pool (and its SandboxTemplate of the same name, see
// EnsurePool) through a SandboxClaim, when the spec asks for that
// template's image and nothing the template does not give (environment,
// resources, runtime); other specs get a new Sandbox.
func WithWarmPool(pool string) Option { return func(o *options) { o.pool = pool } }

// WithGracePeriod sets the pods' termination grace period. Default:
// DefaultGrace.
func WithGracePeriod(d time.Duration) Option {
	return func(o *options) { o.grace = int64(d / time.Second) }
}

// WithHostAddress names this machine's address as the cluster's pods reach
// it (HostAddress), for a server here that boxes call (a local model
// endpoint). Default: none.
func WithHostAddress(addr string) Option { return func(o *options) { o.hostAddr = addr } }

// New connects to the cluster; it makes no call until the first use.
func New(opts ...Option) (*Vendor, error) {
	o := options{version: buildinfo.Get().Version, readyTimeout: DefaultReadyTimeout, grace: DefaultGrace,
		resources: vendors.Resources{CPUs: DefaultCPUs, MemoryBytes: DefaultMemory},
		requests:  vendors.Resources{CPUs: DefaultRequestCPUs, MemoryBytes: DefaultRequestMemory}}
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	o.resources = o.resources.Or(vendors.Resources{CPUs: DefaultCPUs, MemoryBytes: DefaultMemory})
	cfg, ns, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	if o.relay.IsValid() {
		if err := checkRelay(o.relay); err != nil {
			return nil, err
		}
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("kubernetes: namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "boxctl/" + o.version
	// Every box waits on watches and runs execs: the client's default of
	// 5 requests a second would queue a handful of concurrent creates.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	v := &Vendor{cfg: cfg, ns: ns, o: o, forwards: map[forwardKey]*forwarder{}, served: map[string]bool{}}
	if v.core, err = k8s.NewForConfig(cfg); err == nil {
		if v.agents, err = agents.NewForConfig(cfg); err == nil {
			v.ext, err = extensions.NewForConfig(cfg)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	return v, nil
}

// restConfig resolves the cluster as kubectl does.
func restConfig(o options) (*rest.Config, string, error) {
	if o.rest != nil {
		ns := o.namespace
		if ns == "" {
			ns = "default"
		}
		return o.rest, ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: cluster configuration: %w", err)
	}
	ns := o.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("kubernetes: namespace: %w", err)
		}
	}
	return cfg, ns, nil
}

// Close stops the vendor's port-forwards. Boxes live on.
func (v *Vendor) Close() error {
	v.mu.Lock()
	fs := slices.Collect(maps.Values(v.forwards))
	v.forwards, v.closed = map[forwardKey]*forwarder{}, true
	v.mu.Unlock()
	for _, f := range fs {
		f.Close()
	}
	return nil
}

// HostAddress returns this machine's address as the boxes reach it, when
// WithHostAddress named one: a cluster's pods reach no address of the
// caller's by themselves.
func (v *Vendor) HostAddress(context.Context) (string, error) {
	if v.o.hostAddr == "" {
		return "", fmt.Errorf("kubernetes: %w (WithHostAddress)", vendors.ErrNoHostAddress)
	}
	return v.o.hostAddr, nil
}

// Name returns "kubernetes".
func (v *Vendor) Name() string { return Name }

// Namespace returns the boxes' namespace.
func (v *Vendor) Namespace() string { return v.ns }

// Supports reports every create field but a pids limit (Kubernetes sets
// that per node, not per pod). Disk is an ephemeral-storage limit (and the
// size of a suspendable box's volume); runtime is a RuntimeClass name;
// retention makes a suspendable box (suspend.go); egress needs a relay
// (WithEgressRelay).
func (v *Vendor) Supports() vendors.Fields {
	fs := []vendors.Field{vendors.FieldOwner, vendors.FieldLabels, vendors.FieldCPUs, vendors.FieldMemory,
		vendors.FieldDisk, vendors.FieldEnv, vendors.FieldPorts, vendors.FieldRuntime, vendors.FieldRetention, vendors.FieldPool}
	if v.o.relay.IsValid() {
		fs = append(fs, vendors.FieldEgress) // egress.go
	}
	return vendors.NewFields(fs...)
}

// Create makes a Sandbox (or claims a warm one) and returns the box once
// its pod is Ready. See vendors.Vendor.
func (v *Vendor) Create(ctx context.Context, spec vendors.CreateSpec) (vendors.Box, error) {
	if err := vendors.Check(v, spec); err != nil {
		return nil, err
	}
	if err := checkSpec(spec); err != nil {
		return nil, &vendors.SpecError{Vendor: Name, Err: err}
	}
	if err := v.checkAPI(ctx, groupAgents); err != nil {
		return nil, err
	}
	now := time.Now()
	tag, err := vendors.Tag(Name, spec, now, v.o.version)
	if err != nil {
		return nil, err
	}
	all := tag.Labels
	shutdown := metav1.NewTime(now.Add(spec.Lifetime))
	// A pool's pods were made before their policy was known: a confined
	// box is made cold.
	for _, pool := range v.poolsFor(spec) {
		meta, err := objectMeta(boxName(spec.RunTag), all)
		if err != nil {
			return nil, err
		}
		if b, ok, err := v.claim(ctx, pool, spec, meta, shutdown); ok || err != nil {
			return b, err
		}
	}
	sb := &agentsv1.Sandbox{Spec: agentsv1.SandboxSpec{
		SandboxBlueprint: agentsv1.SandboxBlueprint{
			PodTemplate: agentsv1.PodTemplate{Spec: v.podSpec(spec, all[boxmeta.LabelDeadline])},
			// Boxes are reached through the API server (port-forward,
			// exec): no Service.
			Service: new(false),
		},
		Lifecycle:     agentsv1.Lifecycle{ShutdownTime: &shutdown, ShutdownPolicy: new(agentsv1.ShutdownPolicyDelete)},
		OperatingMode: agentsv1.SandboxOperatingModeRunning,
	}}
	if spec.Retention > 0 {
		v.suspendable(spec, all, sb, now)
	}
	meta, err := objectMeta(boxName(spec.RunTag), all)
	if err != nil {
		return nil, err
	}
	maps.Copy(meta.Annotations, sb.Annotations)
	sb.ObjectMeta = meta
	sb.Spec.PodTemplate.ObjectMeta = agentsv1.PodMetadata{Labels: maps.Clone(meta.Labels)}
	if confinedSpec(spec) {
		v.confinePod(sb)
		if err := v.createNetworkPolicy(ctx, meta.Name, *spec.Egress); err != nil {
			return nil, err
		}
	}
	created, err := v.agents.AgentsV1beta1().Sandboxes(v.ns).Create(ctx, sb, metav1.CreateOptions{})
	if err != nil {
		// The API server may have made it before the call failed (a
		// cancelled context): delete it by name.
		derr := v.deleteByName(context.WithoutCancel(ctx), meta.Name)
		if confinedSpec(spec) {
			derr = errors.Join(derr, v.deleteNetworkPolicy(context.WithoutCancel(ctx), meta.Name))
		}
		if derr != nil {
			return nil, &vendors.CleanupError{Vendor: Name, BoxID: meta.Name, Err: errors.Join(fmt.Errorf("kubernetes: create box from %s: %w", spec.Image, err), derr)}
		}
		return nil, fmt.Errorf("kubernetes: create box from %s: %w", spec.Image, v.mapErr(err, ""))
	}
	b := v.box(created.Name, created.Name)
	v.o.logger.Debug("kubernetes box created", "id", created.Name, "run", spec.RunTag, "shutdown", shutdown.Time)
	if confinedSpec(spec) {
		if err := v.ownNetworkPolicy(ctx, created); err != nil {
			return nil, v.failCreate(ctx, b, fmt.Errorf("kubernetes: network policy %s: %w", created.Name, v.mapErr(err, created.Name)))
		}
	}
	if err := b.waitReady(ctx); err != nil {
		return nil, v.failCreate(ctx, b, err)
	}
	return b, nil
}

// failCreate destroys a box whose start failed; the box's id is the
// cleanup handle when that fails too.
func (v *Vendor) failCreate(ctx context.Context, b *Box, err error) error {
	return vendors.Discard(ctx, Name, b.id, b.Destroy, err)
}

// checkSpec refuses what Kubernetes cannot carry: label keys that are not
// qualified names, environment names a container cannot have.
func checkSpec(spec vendors.CreateSpec) error {
	var errs []error
	for k := range spec.Labels {
		if e := validation.IsQualifiedName(k); len(e) > 0 {
			errs = append(errs, fmt.Errorf("label %q: %s", k, strings.Join(e, "; ")))
		}
	}
	for k := range spec.Env {
		switch {
		case !boxproc.EnvName.MatchString(k):
			errs = append(errs, fmt.Errorf("environment variable name %q", k))
		case k == boxmeta.EnvDeadline || k == boxmeta.EnvLifetime:
			errs = append(errs, fmt.Errorf("env %s is set from the lifetime", k))
		}
	}
	if spec.Runtime != "" {
		if e := validation.IsDNS1123Subdomain(spec.Runtime); len(e) > 0 {
			errs = append(errs, fmt.Errorf("runtime %q is not a RuntimeClass name: %s", spec.Runtime, strings.Join(e, "; ")))
		}
	}
	return errors.Join(errs...)
}

// objectMeta is a box's metadata: every label in LabelsAnnotation, and
// those Kubernetes can hold as labels too.
func objectMeta(name string, all map[string]string) (metav1.ObjectMeta, error) {
	raw, err := json.Marshal(all)
	if err != nil {
		return metav1.ObjectMeta{}, err
	}
	l := map[string]string{}
	for k, val := range all {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(val)) == 0 {
			l[k] = val
		}
	}
	return metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{LabelsAnnotation: string(raw)}}, nil
}

// boxLabels returns a box's labels from its metadata.
func boxLabels(m metav1.ObjectMeta) map[string]string {
	out := maps.Clone(m.Labels)
	if out == nil {
		out = map[string]string{}
	}
	var all map[string]string
	if json.Unmarshal([]byte(m.Annotations[LabelsAnnotation]), &all) == nil {
		maps.Copy(out, all)
	}
	return out
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// boxName is a new Sandbox name: "boxctl-", the run tag as a DNS label
// part, and a random suffix; a DNS-1035 label, as a Service of the same
// name would need (the vendor asks for none).
func boxName(runTag string) string {
	s := nameUnsafe.ReplaceAllString(strings.ToLower(runTag), "-")
	if len(s) > 40 {
		s = s[:40]
	}
	s = strings.Trim(s, "-")
	if s != "" {
		s += "-"
	}
	return "boxctl-" + s + strconv.FormatUint(rand.Uint64()&0xffffffffff, 36)
}

// Connect returns the box whose Sandbox is named id. See vendors.Vendor.
func (v *Vendor) Connect(ctx context.Context, id string) (vendors.Box, error) {
	if len(validation.IsDNS1123Subdomain(id)) > 0 {
		return nil, fmt.Errorf("kubernetes: connect: %w", &vendors.NotFoundError{Vendor: Name, ID: id})
	}
	if err := v.checkAPI(ctx, groupAgents); err != nil {
		return nil, err
	}
	sb, err := v.agents.AgentsV1beta1().Sandboxes(v.ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: connect: %w", v.mapErr(err, id))
	}
	if sb.DeletionTimestamp != nil || boxLabels(sb.ObjectMeta)[boxmeta.LabelManaged] != "true" {
		return nil, fmt.Errorf("kubernetes: connect: sandbox %s is not a live boxctl box: %w", id, &vendors.NotFoundError{Vendor: Name, ID: id})
	}
	return v.box(sb.Name, podName(sb)), nil
}

// podName is the name of a Sandbox's pod: its own, or the one an
// agent-sandbox before v0.5 recorded for an adopted warm pod.
func podName(sb *agentsv1.Sandbox) string {
	if p := sb.Annotations[podNameAnnotation]; p != "" {
		return p
	}
	return sb.Name
}

// podNameAnnotation is where agent-sandbox before v0.5 recorded an
// adopted pod's name.
const podNameAnnotation = "agents.x-k8s.io/pod-name"

// List returns the boxes carrying every label of filter. See
// vendors.Vendor.
func (v *Vendor) List(ctx context.Context, filter map[string]string) ([]vendors.Info, error) {
	if err := v.checkAPI(ctx, groupAgents); err != nil {
		return nil, err
	}
	sel := labels.Set{boxmeta.LabelManaged: "true"}
	for k, val := range filter {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(val)) == 0 {
			sel[k] = val
		}
	}
	l, err := v.agents.AgentsV1beta1().Sandboxes(v.ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list boxes: %w", v.mapErr(err, ""))
	}
	out := []vendors.Info{}
	for i := range l.Items {
		sb := &l.Items[i]
		info := sandboxInfo(sb)
		if sb.DeletionTimestamp != nil || !vendors.HasLabels(info.Labels, filter) {
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

func sandboxInfo(sb *agentsv1.Sandbox) vendors.Info {
	l := boxLabels(sb.ObjectMeta)
	i := vendors.Info{ID: sb.Name, Vendor: Name, State: sandboxState(sb), Labels: l, Created: sb.CreationTimestamp.Time}
	if cs := sb.Spec.PodTemplate.Spec.Containers; len(cs) > 0 {
		i.Image = cs[0].Image
	}
	if d, err := boxmeta.ParseDeadline(l[boxmeta.LabelDeadline]); err == nil {
		i.Deadline = d
	}
	if st := sb.Spec.ShutdownTime; st != nil && (i.Deadline.IsZero() || st.Time.Before(i.Deadline)) {
		i.Deadline = st.Time
	}
	// A suspendable box's deadline moves with its suspends: the active
	// one while it runs, the end of its retention while it is suspended.
	if lt, ok := readLifetime(sb); ok {
		i.Deadline = lt.Deadline
		if lt.Suspended {
			i.Deadline = lt.RetainUntil
		}
	}
	return i
}

func sandboxState(sb *agentsv1.Sandbox) vendors.State {
	if sb.DeletionTimestamp != nil {
		return vendors.StateStopped
	}
	if suspended(sb) {
		return vendors.StateSuspended
	}
	if c := meta.FindStatusCondition(sb.Status.Conditions, string(agentsv1.SandboxConditionFinished)); c != nil && c.Status == metav1.ConditionTrue {
		return vendors.StateStopped
	}
	for _, c := range sb.Status.Conditions {
		if c.Type != string(agentsv1.SandboxConditionReady) {
			continue
		}
		switch {
		case c.Status == metav1.ConditionTrue:
			return vendors.StateRunning
		case c.Reason == agentsv1.SandboxReasonExpired:
			return vendors.StateStopped
		}
	}
	return vendors.StateCreating
}

// mapErr turns API errors into the vendors' typed errors.
func (v *Vendor) mapErr(err error, id string) error {
	if apierrors.IsTooManyRequests(err) {
		d, _ := apierrors.SuggestsClientDelay(err)
		return &vendors.RateLimitError{Vendor: Name, Op: "api", RetryAfter: time.Duration(d) * time.Second, Message: err.Error()}
	}
	return vendors.NotFound(Name, id, err, apierrors.IsNotFound)
}

// deleteByName deletes a Sandbox (and its pod) by name; one already gone
// is not an error.
func (v *Vendor) deleteByName(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return v.box(name, name).Destroy(ctx)
}
