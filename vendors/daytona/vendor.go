package daytona

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/boxmeta"
	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
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

// Supports reports the owner, labels, CPU, memory and disk (in whole cores
// and GiB, rounded up), environment and ports. Pids limits and OCI
// runtimes are Daytona's to choose.
func (v *Vendor) Supports() vendors.Fields {
	return vendors.NewFields(vendors.FieldOwner, vendors.FieldLabels, vendors.FieldCPUs, vendors.FieldMemory,
		vendors.FieldDisk, vendors.FieldEnv, vendors.FieldPorts)
}

// Create makes a sandbox from the snapshot spec.Image and waits until it
// is started. See vendors.Vendor and the package documentation.
func (v *Vendor) Create(ctx context.Context, spec vendors.CreateSpec) (vendors.Box, error) {
	if err := vendors.Check(v, spec); err != nil {
		return nil, err
	}
	for k := range spec.Env {
		if k == boxmeta.EnvDeadline || k == boxmeta.EnvLifetime {
			return nil, &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("env %s is set from the lifetime", k)}
		}
	}
	labels := vendors.Labels(spec, time.Now(), v.opts.version)
	token := randomID()
	labels[boxmeta.LabelCreate] = token
	if len(spec.Ports) > 0 {
		ps := slices.Clone(spec.Ports)
		slices.Sort(ps)
		labels[boxmeta.LabelPorts] = joinPorts(slices.Compact(ps))
	}
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	env[boxmeta.EnvDeadline] = labels[boxmeta.LabelDeadline]
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
	start := time.Now()
	sb, err := v.create(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("daytona: create box from %s: %w", spec.Image, err)
	}
	v.opts.log.Debug("daytona sandbox created", "id", sb.ID, "run", spec.RunTag, "state", sb.State, "took", time.Since(start))
	b := v.newBox(sb)
	if err := b.waitStarted(ctx, sb); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := b.Destroy(cctx); derr != nil {
			return nil, &vendors.CleanupError{Vendor: Name, BoxID: sb.ID, Err: errors.Join(err, derr)}
		}
		return nil, err
	}
	v.opts.log.Debug("daytona sandbox started", "id", sb.ID, "took", time.Since(start))
	return b, nil
}

// create asks for the sandbox, at most opts.attempts times. An answer that
// leaves the outcome unknown (a server error, a lost connection) is
// followed by a look-up of the sandbox by its run tag and create token,
// then by its name, before the next attempt; and the name is unique to
// this call, so a create that succeeded unseen makes the next attempt a
// 409 that names the sandbox, never a second sandbox.
func (v *Vendor) create(ctx context.Context, req createSandbox) (sandbox, error) {
	var last error
	for attempt := 1; attempt <= v.opts.attempts; attempt++ {
		sb, err := v.postSandbox(ctx, req)
		if err == nil {
			return sb, nil
		}
		last = err
		st := status(err)
		switch {
		case ctx.Err() != nil:
			v.abandon(ctx, req)
			return sandbox{}, fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		case st == http.StatusConflict:
			if sb, err := v.getSandbox(ctx, req.Name); err == nil {
				return sb, nil
			}
			return sandbox{}, typed("create", "", last)
		case st == 0, st >= 500:
			// The outcome is unknown: look for the sandbox.
		default:
			return sandbox{}, typed("create", "", err)
		}
		if sb, ok := v.findCreated(ctx, req); ok {
			v.opts.log.Debug("daytona create answered with an error, but made the sandbox", "id", sb.ID, "status", st)
			return sb, nil
		}
		v.opts.log.Debug("daytona create failed; trying again", "attempt", attempt, "status", st, "err", err)
		if err := sleep(ctx, v.opts.poll); err != nil {
			v.abandon(ctx, req)
			return sandbox{}, err
		}
	}
	return sandbox{}, typed("create", "", last)
}

// findCreated looks for the sandbox an earlier attempt of req made: by its
// labels (run tag and create token), then by its name.
func (v *Vendor) findCreated(ctx context.Context, req createSandbox) (sandbox, bool) {
	l, err := v.listSandboxes(ctx, map[string]string{
		boxmeta.LabelRunTag: req.Labels[boxmeta.LabelRunTag], boxmeta.LabelCreate: req.Labels[boxmeta.LabelCreate]})
	if err == nil {
		for _, sb := range l {
			if sb.Labels[boxmeta.LabelCreate] == req.Labels[boxmeta.LabelCreate] && !sb.deleted() {
				return sb, true
			}
		}
	}
	if sb, err := v.getSandbox(ctx, req.Name); err == nil && !sb.deleted() {
		return sb, true
	}
	return sandbox{}, false
}

// abandon removes the sandbox of a create its caller gave up on midway,
// if the control plane made it.
func (v *Vendor) abandon(ctx context.Context, req createSandbox) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if sb, ok := v.findCreated(cctx, req); ok {
		_ = v.newBox(sb).Destroy(cctx)
	}
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

func joinPorts(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Close releases idle connections. Boxes live on.
func (v *Vendor) Close() error {
	v.opts.httpClient.CloseIdleConnections()
	return nil
}
