package e2b

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Name is the vendor's name.
const Name = "e2b"

// Vendor is one E2B account: it makes boxes (sandboxes) from templates,
// finds the ones it made by their metadata, and publishes images as
// templates. It is safe for concurrent use.
type Vendor struct {
	o    options
	api  *vendorhttp.Client
	http *http.Client // envd and exposed ports: no retries, streams
}

var (
	_ vendors.Vendor        = (*Vendor)(nil)
	_ vendors.ImageImporter = (*Vendor)(nil)
)

// New returns a client of the E2B account apiKey (sent as X-API-Key, never
// logged nor part of an error).
func New(apiKey string, opts ...Option) (*Vendor, error) {
	if apiKey == "" {
		return nil, errors.New("e2b: API key is empty (set E2B_API_KEY)")
	}
	o, err := makeOptions(opts)
	if err != nil {
		return nil, err
	}
	api, err := vendorhttp.New(vendorhttp.Config{Vendor: Name, BaseURL: o.apiURL,
		Header: http.Header{"X-Api-Key": {apiKey}}, DecodeError: decodeError},
		append([]vendorhttp.Option{vendorhttp.WithHTTPClient(o.httpClient), vendorhttp.WithLogger(o.log)}, o.retry...)...)
	if err != nil {
		return nil, err
	}
	return &Vendor{o: o, api: api, http: o.httpClient}, nil
}

// Close releases idle connections. Boxes live on.
func (v *Vendor) Close() error {
	v.http.CloseIdleConnections()
	return nil
}

// Name returns "e2b".
func (v *Vendor) Name() string { return Name }

// HostAddress returns this machine's address as the sandboxes reach it,
// when WithHostAddress named one; else vendors.ErrNoHostAddress.
func (v *Vendor) HostAddress(context.Context) (string, error) {
	if v.o.hostAddr == "" {
		return "", fmt.Errorf("e2b: %w (WithHostAddress)", vendors.ErrNoHostAddress)
	}
	return v.o.hostAddr, nil
}

// Supports reports what a sandbox honours: owner, labels (metadata),
// environment (envVars), ports and an egress policy (E2B's network rules,
// enforced by E2B; a rule may not name a port). CPU and memory are the
// template's (ImportRequest.Resources), not a sandbox's.
func (v *Vendor) Supports() vendors.Fields {
	return vendors.NewFields(vendors.FieldOwner, vendors.FieldLabels, vendors.FieldEnv, vendors.FieldPorts, vendors.FieldRetention,
		vendors.FieldEgress)
}

// Create makes a sandbox from the template spec.Image with the lifetime as
// its timeout and the box's labels as its metadata, and returns once its
// envd answers. A lost answer or a server error never makes a second
// sandbox: before asking again, Create looks for the sandbox of the
// earlier attempt by its create token (boxmeta.LabelCreate), and when
// more than one turned up after all it keeps one and kills the others.
func (v *Vendor) Create(ctx context.Context, spec vendors.CreateSpec) (vendors.Box, error) {
	if err := vendors.Check(v, spec); err != nil {
		return nil, err
	}
	tag, err := vendors.Tag(Name, spec, time.Now(), v.o.version)
	if err != nil {
		return nil, err
	}
	labels, token, env := tag.Labels, tag.Token, tag.Env
	if spec.Retention > 0 { // suspendable (suspend.go)
		labels[boxmeta.LabelRetention] = strconv.FormatInt(int64(spec.Retention/time.Second), 10)
	}
	no := false
	req := newSandbox{TemplateID: spec.Image, Timeout: secondsOf(spec.Lifetime),
		Network: &networkConfig{AllowPublicTraffic: &no}, Metadata: labels, EnvVars: env}
	if spec.Egress != nil && !spec.Egress.Open {
		if req.Network.egressRules, err = networkRules(*spec.Egress); err != nil {
			return nil, err
		}
	}

	sb, err := v.createOnce(ctx, req, token)
	if err != nil {
		return nil, err
	}
	b := v.newBox(sb)
	b.labels = labels
	v.o.log.Debug("e2b sandbox created", "id", sb.SandboxID, "run", spec.RunTag)
	if err := b.waitReady(ctx, v.o.readyTimeout); err != nil {
		return nil, vendors.Discard(ctx, Name, sb.SandboxID, b.Destroy, err)
	}
	return b, nil
}

// createOnce asks for the sandbox until one exists, at most attempts
// times, never twice for one that may exist (see Create and
// vendors.IdempotentCreate).
func (v *Vendor) createOnce(ctx context.Context, req newSandbox, token string) (sandbox, error) {
	byToken := map[string]string{boxmeta.LabelCreate: token}
	return vendors.IdempotentCreate[sandbox]{
		Vendor:   Name,
		Attempts: v.o.attempts,
		Create: func(ctx context.Context) (sandbox, error) {
			sb, err := v.createSandbox(ctx, req)
			if err != nil {
				return sandbox{}, v.mapErr("create", "", err)
			}
			return sb, nil
		},
		// A refusal (a 429 was retried as long as the bounds allow
		// already) made nothing; a server error or a cut connection may
		// have.
		Unsure: func(err error) bool {
			var ae *vendorhttp.APIError
			if errors.As(err, &ae) {
				return ae.Status >= 500
			}
			return !errors.Is(err, vendors.ErrRateLimited)
		},
		Find: func(ctx context.Context) ([]sandbox, error) {
			found, err := v.listSandboxes(ctx, byToken)
			out := make([]sandbox, len(found))
			for i, d := range found {
				out[i] = sandbox{SandboxID: d.SandboxID}
			}
			return out, err
		},
		// A sandbox found by its token lacks its envd tokens: connecting
		// answers them.
		Adopt: func(ctx context.Context, sb sandbox) (sandbox, error) {
			d, err := v.getSandbox(ctx, sb.SandboxID)
			if err == nil {
				sb, err = v.connectSandbox(ctx, sb.SandboxID, time.Until(d.EndAt))
			}
			if err != nil {
				return sandbox{}, v.mapErr("create", sb.SandboxID, err)
			}
			return sb, nil
		},
		ID: func(sb sandbox) string { return sb.SandboxID },
		Destroy: func(ctx context.Context, id string) error {
			if err := v.killSandbox(ctx, id); err != nil && !isStatus(err, http.StatusNotFound) {
				return err
			}
			return nil
		},
	}.Run(ctx)
}

// Connect returns the sandbox id, with the tokens its envd and ports
// want. Its timeout stays as it is.
func (v *Vendor) Connect(ctx context.Context, id string) (vendors.Box, error) {
	d, err := v.getSandbox(ctx, id)
	if err != nil {
		return nil, v.mapErr("connect", id, err)
	}
	sb, err := v.connectSandbox(ctx, id, time.Until(d.EndAt))
	if err != nil {
		return nil, v.mapErr("connect", id, err)
	}
	b := v.newBox(sb)
	b.setDetail(d)
	return b, nil
}

// List returns the sandboxes this client's vendor made (LabelManaged)
// whose metadata holds every pair of filter.
func (v *Vendor) List(ctx context.Context, filter map[string]string) ([]vendors.Info, error) {
	f := maps.Clone(filter)
	if f == nil {
		f = map[string]string{}
	}
	f[boxmeta.LabelManaged] = "true"
	found, err := v.listSandboxes(ctx, f)
	if err != nil {
		return nil, v.mapErr("list", "", err)
	}
	out := make([]vendors.Info, 0, len(found))
	for _, d := range found {
		out = append(out, info(d))
	}
	slices.SortFunc(out, func(a, b vendors.Info) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// info describes a sandbox.
func info(d sandboxDetail) vendors.Info {
	st := vendors.StateUnknown
	switch d.State {
	case stateRunning:
		st = vendors.StateRunning
	case statePaused:
		st = vendors.StateStopped
	}
	i := vendors.Info{ID: d.SandboxID, Vendor: Name, State: st, Image: d.TemplateID, Labels: d.Metadata,
		Created: d.StartedAt, Deadline: d.EndAt}
	if i.Labels == nil {
		i.Labels = map[string]string{}
	}
	if secs, err := strconv.ParseInt(i.Labels[boxmeta.LabelRetention], 10, 64); err == nil && secs > 0 {
		// Suspendable (suspend.go): the timeout is the active budget; a
		// paused sandbox is kept its retention past the end it had.
		if st == vendors.StateStopped {
			i.State, i.Deadline = vendors.StateSuspended, d.EndAt.Add(time.Duration(secs)*time.Second)
		}
		return i
	}
	if t, err := boxmeta.ParseDeadline(i.Labels[boxmeta.LabelDeadline]); err == nil && (d.EndAt.IsZero() || t.Before(d.EndAt)) {
		i.Deadline = t
	}
	return i
}
