package daytona

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Name is the vendor's name.
const Name = "daytona"

// sdkVersion is the Daytona SDK version this client speaks as
// (X-Daytona-SDK-Version): the toolbox answers a command's logs with
// stdout and stderr apart only to SDKs from 0.167.0 on.
const sdkVersion = "0.218.0"

// Vendor makes boxes as Daytona sandboxes and publishes box images as
// Daytona snapshots. It is safe for concurrent use.
type Vendor struct {
	opts   options
	api    *vendorhttp.Client
	header http.Header // credentials and client headers of every call
}

var (
	_ vendors.Vendor        = (*Vendor)(nil)
	_ vendors.ImageImporter = (*Vendor)(nil)
	_ vendors.ImageRegistry = (*Vendor)(nil)
	_ vendors.Suspender     = (*Vendor)(nil)
)

// New returns a client of the Daytona control plane that authenticates
// with the API key (never logged, never part of an error).
func New(apiKey string, opts ...Option) (*Vendor, error) {
	if apiKey == "" {
		return nil, errors.New("daytona: API key is empty (set DAYTONA_API_KEY)")
	}
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	h := http.Header{
		"Authorization":         {"Bearer " + apiKey},
		"X-Daytona-Source":      {"boxctl"},
		"X-Daytona-Sdk-Version": {sdkVersion},
	}
	if o.orgID != "" {
		h.Set("X-Daytona-Organization-ID", o.orgID)
	}
	v := &Vendor{opts: o, header: h}
	if v.api, err = v.client(o.apiURL, decodeError); err != nil {
		return nil, err
	}
	return v, nil
}

// client returns a client of the API at base (the control plane, or a
// sandbox's toolbox) that decodes its error bodies with decode.
func (v *Vendor) client(base string, decode func([]byte, *vendorhttp.APIError) bool) (*vendorhttp.Client, error) {
	return vendorhttp.New(vendorhttp.Config{Vendor: Name, BaseURL: base, Header: v.header,
		DecodeError: decode, RetryAfter: vendorhttp.RetryAfterPrefixed("Retry-After")},
		append([]vendorhttp.Option{vendorhttp.WithHTTPClient(v.opts.httpClient), vendorhttp.WithLogger(v.opts.log)}, v.opts.retry...)...)
}

// Name returns "daytona".
func (v *Vendor) Name() string { return Name }

// HostAddress returns this machine's address as the sandboxes reach it,
// when WithHostAddress named one; else vendors.ErrNoHostAddress.
func (v *Vendor) HostAddress(context.Context) (string, error) {
	if v.opts.hostAddr == "" {
		return "", fmt.Errorf("daytona: %w (WithHostAddress)", vendors.ErrNoHostAddress)
	}
	return v.opts.hostAddr, nil
}

// Supports reports the owner, labels, CPU, memory and disk (in whole cores
// and GiB, rounded up), environment, ports and an egress policy (Daytona's
// networkBlockAll and networkAllowList, enforced by Daytona: IPv4 CIDR
// rules only, up to 5, fixed at create). Pids limits and OCI runtimes are
// Daytona's to choose. A retention makes a suspendable box (Suspender).
func (v *Vendor) Supports() vendors.Fields {
	return vendors.NewFields(vendors.FieldOwner, vendors.FieldLabels, vendors.FieldCPUs, vendors.FieldMemory,
		vendors.FieldDisk, vendors.FieldEnv, vendors.FieldPorts, vendors.FieldRetention, vendors.FieldEgress)
}

// Create makes a sandbox from the snapshot spec.Image and waits until it
// is started. See vendors.Vendor and the package documentation.
func (v *Vendor) Create(ctx context.Context, spec vendors.CreateSpec) (vendors.Box, error) {
	if err := vendors.Check(v, spec); err != nil {
		return nil, err
	}
	tag, err := vendors.Tag(Name, spec, time.Now(), v.opts.version)
	if err != nil {
		return nil, err
	}
	labels, token, env := tag.Labels, tag.Token, tag.Env
	req := createSandbox{
		Name:     spec.RunTag + "-" + token[:12],
		Snapshot: spec.Image,
		Env:      env,
		Labels:   labels,
		CPU:      int(math.Ceil(spec.Resources.CPUs)),
		Memory:   ceilGiB(spec.Resources.MemoryBytes),
		Disk:     ceilGiB(spec.Resources.DiskBytes),
		// Daytona stops a sandbox idle this long, and deletes a stopped
		// one at once: so an abandoned box goes at most a lifetime after
		// its last use, whatever ends it in the box.
		AutoStopInterval:   int(math.Ceil(spec.Lifetime.Minutes())),
		AutoDeleteInterval: 0,
	}
	retained(&req, spec.Retention)
	if spec.Egress != nil && !spec.Egress.Open {
		if err := networkRules(&req, *spec.Egress); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	sb, err := v.create(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("daytona: create box from %s: %w", spec.Image, err)
	}
	v.opts.log.Debug("daytona sandbox created", "id", sb.ID, "run", spec.RunTag, "state", sb.State, "took", time.Since(start))
	b := v.newBox(sb)
	if err := b.waitStarted(ctx, sb); err != nil {
		return nil, vendors.Discard(ctx, Name, sb.ID, b.Destroy, err)
	}
	v.opts.log.Debug("daytona sandbox started", "id", sb.ID, "took", time.Since(start))
	return b, nil
}

// create asks for the sandbox, at most opts.attempts times, never twice
// for one that may exist (vendors.IdempotentCreate). An answer that leaves
// the outcome unknown (a server error, a lost connection) is followed by a
// look-up of the sandbox by its run tag and create token, then by its
// name, before the next attempt; and the name is unique to this call, so
// a create that succeeded unseen makes the next attempt a 409, which is
// looked up the same way, never a second sandbox.
func (v *Vendor) create(ctx context.Context, req createSandbox) (sandbox, error) {
	return vendors.IdempotentCreate[sandbox]{
		Vendor:   Name,
		Attempts: v.opts.attempts,
		Backoff:  v.opts.poll,
		Create: func(ctx context.Context) (sandbox, error) {
			sb, err := v.postSandbox(ctx, req)
			if err != nil {
				return sandbox{}, typed("create", "", err)
			}
			return sb, nil
		},
		Unsure: func(err error) bool {
			st := status(err)
			return st == 0 || st >= 500 || st == http.StatusConflict
		},
		Find:    func(ctx context.Context) ([]sandbox, error) { return v.findCreated(ctx, req) },
		ID:      func(sb sandbox) string { return sb.ID },
		Destroy: func(ctx context.Context, id string) error { return v.newBox(sandbox{ID: id}).Destroy(ctx) },
	}.Run(ctx)
}

// findCreated returns the sandboxes an attempt of req made: by their
// labels (run tag and create token), else by the name.
func (v *Vendor) findCreated(ctx context.Context, req createSandbox) ([]sandbox, error) {
	token := req.Labels[boxmeta.LabelCreate]
	l, err := v.listSandboxes(ctx, map[string]string{boxmeta.LabelRunTag: req.Labels[boxmeta.LabelRunTag], boxmeta.LabelCreate: token})
	if err != nil {
		return nil, typed("create", "", err)
	}
	var found []sandbox
	for _, sb := range l {
		if sb.Labels[boxmeta.LabelCreate] == token && !sb.deleted() {
			found = append(found, sb)
		}
	}
	if len(found) > 0 {
		return found, nil
	}
	// The name is the call's own: no second sandbox can have it, but a
	// listing may lag behind.
	sb, err := v.getSandbox(ctx, req.Name)
	switch {
	case status(err) == http.StatusNotFound:
	case err != nil:
		return nil, typed("create", "", err)
	case !sb.deleted():
		found = append(found, sb)
	}
	return found, nil
}

// Connect returns the sandbox id (or name) if boxctl made it. See
// vendors.Vendor.
func (v *Vendor) Connect(ctx context.Context, id string) (vendors.Box, error) {
	sb, err := v.getSandbox(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("daytona: connect: %w", typed("connect", id, err))
	}
	if sb.deleted() || sb.Labels[boxmeta.LabelManaged] != "true" {
		return nil, fmt.Errorf("daytona: connect: %w", &vendors.NotFoundError{Vendor: Name, ID: id})
	}
	return v.newBox(sb), nil
}

// List returns boxctl's sandboxes carrying every label of filter, those
// on their way out excepted. See vendors.Vendor.
func (v *Vendor) List(ctx context.Context, filter map[string]string) ([]vendors.Info, error) {
	labels := maps.Clone(filter)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[boxmeta.LabelManaged] = "true"
	l, err := v.listSandboxes(ctx, labels)
	if err != nil {
		return nil, fmt.Errorf("daytona: list boxes: %w", typed("list", "", err))
	}
	out := make([]vendors.Info, 0, len(l))
	for _, sb := range l {
		if sb.deleted() || !vendors.HasLabels(sb.Labels, labels) {
			continue
		}
		out = append(out, info(sb))
	}
	return out, nil
}

func info(sb sandbox) vendors.Info {
	i := vendors.Info{ID: sb.ID, Vendor: Name, State: stateOf(sb.State), Image: sb.Snapshot, Labels: sb.Labels}
	if t, err := time.Parse(time.RFC3339Nano, sb.CreatedAt); err == nil {
		i.Created = t
	}
	if d, err := boxmeta.ParseDeadline(sb.Labels[boxmeta.LabelDeadline]); err == nil {
		i.Deadline = d
	}
	if retain, ok := retentionOf(sb); ok && stoppedState(sb.State) {
		i.State = vendors.StateSuspended
		if at, err := time.Parse(time.RFC3339Nano, sb.UpdatedAt); err == nil {
			i.Deadline = at.Add(retain)
		}
	}
	return i
}

func stateOf(s string) vendors.State {
	switch s {
	case StateStarted:
		return vendors.StateRunning
	case StateCreating, StateRestoring, StateStarting, StatePendingBuild, StateBuildingSnapshot, StatePullingSnapshot:
		return vendors.StateCreating
	case StateStopped, StateStopping, StateDestroyed, StateDestroying, StateError, StateBuildFailed, StateArchived, StateArchiving:
		return vendors.StateStopped
	}
	return vendors.StateUnknown
}

func ceilGiB(n int64) int {
	if n <= 0 {
		return 0
	}
	return int((n + 1<<30 - 1) >> 30)
}

// Close releases idle connections. Boxes live on.
func (v *Vendor) Close() error {
	v.opts.httpClient.CloseIdleConnections()
	return nil
}
