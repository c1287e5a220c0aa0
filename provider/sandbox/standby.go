package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/pins"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// Standby boxes. A standby box is booted ahead of any request: the box
// runs, its bridge waits in standby (box-bridge --standby) holding no
// bearer, no Router and no user environment, and the harness pin was
// checked on its /health. Claim hands it all of that in one request.

// standbyTokenFile is where the pool token waits for the standby bridge,
// which takes it as its stdin; the file is removed before the bridge
// starts.
const standbyTokenFile = "/tmp/.boxctl/pool-token"

// StandbyRecord is what a process needs to claim a standby box: a pool
// records it where every claimer finds it. Token is a secret.
type StandbyRecord struct {
	Vendor  string    `json:"vendor"`
	BoxID   string    `json:"boxId"`
	Harness string    `json:"harness"`
	RunTag  string    `json:"runTag"`
	Token   string    `json:"token"`
	Created time.Time `json:"created"`
	// Deadline is the box's hard end: a claim's deadline must fall
	// before it.
	Deadline time.Time `json:"deadline"`
	// Keeper is the owner label of the process that keeps the box
	// pooled; its box is gone with it.
	Keeper string `json:"keeper"`
	// Egress is the policy the box waits under (Options.Egress of the
	// pool's provider): nil for an open box. A claim asks for a policy
	// of the same kind, confined or open, and replaces it.
	Egress *egress.Policy `json:"egress,omitempty"`
	// Address is the box's address where its vendor tells it: the
	// claim's gate and broker bind it without asking the vendor.
	Address string `json:"address,omitempty"`
}

// String describes the record without its token.
func (r StandbyRecord) String() string {
	return fmt.Sprintf("standby box %s on %s (%s)", r.BoxID, r.Vendor, r.Harness)
}

// LogValue logs the record without its token.
func (r StandbyRecord) LogValue() slog.Value { return slog.StringValue(r.String()) }

// GoString keeps %#v from printing the token.
func (r StandbyRecord) GoString() string { return r.String() }

// Format keeps every fmt verb from printing the token.
func (r StandbyRecord) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(r.String())) }

// StandbySpec describes the standby boxes of a pool.
type StandbySpec struct {
	// Harness is the harness the box's bridge serves (required).
	Harness string
	// Pool is the pool's name, the box's boxmeta.LabelPool.
	Pool string
	// MaxAge is how long the box may wait unclaimed: its hard deadline
	// is MaxAge and the provider's Lifetime from its start.
	MaxAge time.Duration
	// Labels are added to the box's labels.
	Labels map[string]string
}

// Standby boots a standby box and returns its record. The box belongs to
// the calling process (reaper.ProcessOwner): `boxctl gc` removes it once
// that process is gone, unless a claim recorded it in a state first.
func (p *Provider) Standby(ctx context.Context, s StandbySpec) (StandbyRecord, error) {
	h, ok := p.o.Pins.Harness(s.Harness)
	if !ok {
		return StandbyRecord{}, fmt.Errorf("standby box: harness %q: %w", s.Harness, pins.ErrUnknownHarness)
	}
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[boxmeta.LabelPool] = s.Pool
	spec := p.spec(CreateRequest{Labels: labels, Lifetime: s.MaxAge + p.o.Lifetime})
	spec.RunTag, spec.Owner = NewRunTag(), reaper.ProcessOwner()
	// A standby box waits without turns by design: gc never suspends it.
	delete(spec.Labels, boxmeta.LabelIdleSuspend)
	if err := vendors.Check(p.o.Vendor, spec); err != nil {
		return StandbyRecord{}, fmt.Errorf("standby box: %w", err)
	}
	box, err := p.o.Vendor.Create(ctx, spec)
	if err != nil {
		return StandbyRecord{}, fmt.Errorf("standby box: %w", err)
	}
	p.emit(Event{Type: EventCreated, BoxID: box.ID(), RunTag: spec.RunTag})
	rec := StandbyRecord{Vendor: p.o.Vendor.Name(), BoxID: box.ID(), Harness: h.Name, RunTag: spec.RunTag, Token: newSecret(),
		Created: time.Now(), Keeper: spec.Owner}
	// A confined pool's box waits under the pool's policy (deny-all,
	// but the broker) from its start: the claim replaces it.
	egressAddr, err := p.confine(ctx, box, spec)
	var ep vendors.Endpoint
	if err == nil {
		ep, err = p.bootStandby(ctx, box, h, rec.Token)
	}
	if err != nil {
		p.forgetEgress(ctx, egressAddr)
		err = p.cleanup(ctx, box, fmt.Errorf("standby box: %w", err))
		p.emit(Event{Type: EventDestroyed, BoxID: box.ID(), RunTag: spec.RunTag, Reason: ReasonFailure, Detail: err.Error()})
		return StandbyRecord{}, err
	}
	if info, err := box.Status(ctx); err == nil {
		rec.Deadline = info.Deadline
	} else {
		rec.Deadline = rec.Created.Add(spec.Lifetime)
	}
	conn := standbyConn{box: box, ep: ep, addr: egressAddr}
	if confined(spec) {
		pol := *spec.Egress
		rec.Egress = &pol
	}
	if a, ok := box.(vendors.Addressed); ok && !conn.addr.IsValid() {
		// Known now, so that a claim asks the vendor nothing: the
		// broker binds the box's token to it, a gate its policy.
		if addr, err := a.Address(ctx); err == nil {
			conn.addr = addr
		}
	}
	if conn.addr.IsValid() {
		rec.Address = conn.addr.String()
	}
	p.standbys.Store(rec.BoxID, conn)
	return rec, nil
}

// standbyConn is how this process reaches a standby box it booted, and
// the box's address where its vendor tells it.
type standbyConn struct {
	box  vendors.Box
	ep   vendors.Endpoint
	addr netip.Addr
}

// standbyEnv is the standby bridge's configuration: nothing personal.
func (p *Provider) standbyEnv(h *pins.Harness) map[string]string {
	env := maps.Clone(p.o.BridgeEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, map[string]string{wire.EnvHost: "0.0.0.0", wire.EnvPort: strconv.Itoa(BridgePort), wire.EnvBackends: h.Backend,
		wire.EnvDataDir: "/home/box/.box-bridge", envMaxRuns: "1",
		wire.EnvPrestartCwd: Workspace, wire.EnvModelRelay: "1", wire.EnvDeadlineFile: boxmeta.DeadlineFile})
	if len(p.o.BrokerCA) > 0 {
		env[wire.EnvRouterCA] = string(p.o.BrokerCA)
	}
	return env
}

// bootStandby starts the standby bridge with the pool token on its stdin
// (a file it opens, removes, then reads), waits for its /health and
// checks the pin.
func (p *Provider) bootStandby(ctx context.Context, box vendors.Box, h *pins.Harness, token string) (vendors.Endpoint, error) {
	if err := box.Write(ctx, standbyTokenFile, []byte(token+"\n"), 0o600); err != nil {
		return vendors.Endpoint{}, fmt.Errorf("pool token: %w", err)
	}
	cmd := []string{"sh", "-c", `exec 0<"$0" && rm -f "$0" && exec box-bridge --standby`, standbyTokenFile}
	proc, err := box.Spawn(ctx, vendors.SpawnSpec{Name: BridgeProcess, Command: cmd, Env: p.standbyEnv(h), Dir: Workspace})
	if err != nil {
		return vendors.Endpoint{}, fmt.Errorf("start bridge: %w", err)
	}
	ep, err := box.Endpoint(ctx, BridgePort)
	if err != nil {
		return vendors.Endpoint{}, fmt.Errorf("bridge endpoint: %w", err)
	}
	client := ep.Client()
	defer client.CloseIdleConnections()
	exited := make(chan error, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		code, err := proc.Wait(wctx)
		switch {
		case wctx.Err() != nil:
		case err != nil:
			exited <- fmt.Errorf("bridge process: %w", err)
		default:
			exited <- &BridgeExitError{ExitCode: code, Log: processLog(context.WithoutCancel(ctx), proc)}
		}
	}()
	health, err := healthWait{URL: ep.URL, Client: client, Backend: h.Name, Timeout: p.o.ReadyTimeout}.WaitUntilReady(ctx, exited)
	if err != nil {
		return vendors.Endpoint{}, fmt.Errorf("wait for bridge: %w", err)
	}
	if !versionMatches(h, health.Version) {
		return vendors.Endpoint{}, &PinMismatchError{Harness: h.Name, Pinned: h.Version, Reported: health.Version}
	}
	return ep, nil
}

// CheckStandby reports whether a standby box still waits: its box runs
// and its bridge answers /health in standby with its backend ready.
func (p *Provider) CheckStandby(ctx context.Context, rec StandbyRecord) error {
	box, err := p.o.Vendor.Connect(ctx, rec.BoxID)
	if err != nil {
		return err
	}
	ep, err := box.Endpoint(ctx, BridgePort)
	if err != nil {
		return err
	}
	client := ep.Client()
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.URL+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h wire.Health
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&h); err != nil || !h.Standby || h.Status != wire.HealthStandby {
		return fmt.Errorf("standby box %s: /health answered %d, not standby", rec.BoxID, resp.StatusCode)
	}
	return nil
}

// standbyBox reaches a standby box: the one this process booted, else
// through the vendor.
func (p *Provider) standbyBox(ctx context.Context, rec StandbyRecord) (standbyConn, error) {
	if c, ok := p.standbys.LoadAndDelete(rec.BoxID); ok {
		return c.(standbyConn), nil
	}
	box, err := p.o.Vendor.Connect(ctx, rec.BoxID)
	if err != nil {
		return standbyConn{}, err
	}
	ep, err := box.Endpoint(ctx, BridgePort)
	conn := standbyConn{box: box, ep: ep}
	if a, perr := netip.ParseAddr(rec.Address); perr == nil {
		conn.addr = a
	}
	return conn, err
}

// DestroyStandby removes a standby box; one already gone is not an error.
func (p *Provider) DestroyStandby(ctx context.Context, rec StandbyRecord) error {
	p.standbys.Delete(rec.BoxID)
	box, err := p.o.Vendor.Connect(ctx, rec.BoxID)
	if errors.Is(err, vendors.ErrNotFound) {
		// Gone already: its address may be another box's now.
		return nil
	}
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(rec.Address); err == nil && rec.Egress != nil {
		defer p.forgetEgress(ctx, a)
	}
	err = box.Destroy(ctx)
	p.emit(Event{Type: EventDestroyed, BoxID: rec.BoxID, RunTag: rec.RunTag, Reason: ReasonUser})
	return err
}

// ErrClaimRefused is matched by a *ClaimError.
var ErrClaimRefused = errors.New("standby box refused the claim")

// ClaimError is a standby bridge that refused a claim.
type ClaimError struct {
	BoxID  string
	Status int
	// Type is the bridge's error type (wire.TypeAlreadyClaimed, ...).
	Type string
}

func (e *ClaimError) Error() string {
	return fmt.Sprintf("claim of standby box %s: %d %s", e.BoxID, e.Status, e.Type)
}

// Is reports ErrClaimRefused.
func (e *ClaimError) Is(target error) bool { return target == ErrClaimRefused }

// ErrLifetimeTooLong is a claim whose lifetime ends after the standby
// box's hard deadline.
var ErrLifetimeTooLong = errors.New("the lifetime ends after the standby box's deadline")

// Claim makes the environment of req in a standby box: one request over
// the box's endpoint hands its bridge a fresh bearer, the Router, req's
// env, metadata and labels, and the deadline (from now, req's lifetime or
// Options.Lifetime), which the box then ends at; req's workspace is
// cloned after that. rec must have been taken
// out of its pool by the caller, so that no other claims it.
func (p *Provider) Claim(ctx context.Context, rec StandbyRecord, req CreateRequest) (_ *Environment, err error) {
	ctx, span := tracer.Start(ctx, "sandbox.claim", trace.WithAttributes(
		attribute.String("boxctl.vendor", p.o.Vendor.Name()), attribute.String("boxctl.harness", req.Profile.Harness),
		attribute.String("boxctl.box_id", rec.BoxID), attribute.String("boxctl.run_tag", rec.RunTag)))
	defer func() { tracing.End(span, err) }()
	t := &timeline{}
	_, end := t.start(ctx, PhaseChecks)
	h, _, err := p.check(req)
	if err == nil && h.Name != rec.Harness {
		err = fmt.Errorf("claim: standby box %s serves %s, not %s", rec.BoxID, rec.Harness, h.Name)
	}
	end(err)
	if err != nil {
		return nil, err
	}
	life := p.o.Lifetime
	if req.Lifetime != 0 {
		life = req.Lifetime
	}
	deadline := time.Now().Add(life)
	if !rec.Deadline.IsZero() && deadline.After(rec.Deadline) {
		return nil, fmt.Errorf("claim: %w", ErrLifetimeTooLong)
	}
	pctx, end := t.start(ctx, PhaseClaim)
	conn, err := p.standbyBox(pctx, rec)
	if err != nil {
		err = fmt.Errorf("claim: %w", err)
		end(err)
		return nil, err
	}
	box, ep := conn.box, conn.ep
	pol, egressAddr, err := p.claimEgress(pctx, box, conn.addr, rec, req)
	if err != nil {
		err = fmt.Errorf("claim: %w", err)
		end(err)
		return nil, err
	}
	claim, err := p.newClaim(pctx, box, conn.addr, req, deadline)
	if err != nil {
		end(err)
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer func() {
		if err != nil {
			// The token granted for the claim opens nothing now.
			p.revokeModel(context.WithoutCancel(ctx), box.ID())
		}
	}()
	// The claim's connection carries the environment's requests after it.
	ep = ep.Shared()
	client := ep.Client()
	defer func() {
		if err != nil {
			client.CloseIdleConnections()
		}
	}()
	err = postClaim(pctx, client, ep.URL, rec, claim)
	end(err)
	if err != nil {
		return nil, err
	}
	e, err := p.afterClaim(ctx, t, box, ep, rec, req, h, claim)
	if err != nil {
		return nil, err
	}
	e.egress, e.egressAddr, e.ref.Egress = pol, egressAddr, pol
	return e, nil
}

// newClaim is the handover of req's environment to box, ending at
// deadline, with a fresh bearer and the box's model access; addr, when
// valid, is the box's address, known already.
func (p *Provider) newClaim(ctx context.Context, box vendors.Box, addr netip.Addr, req CreateRequest, deadline time.Time) (wire.Claim, error) {
	modelURL, modelKey, err := p.modelAccess(ctx, box, addr, deadline.Add(tokenMargin))
	if err != nil {
		return wire.Claim{}, err
	}
	secs, _ := strconv.ParseInt(boxmeta.FormatDeadline(deadline), 10, 64)
	return wire.Claim{Bearer: newSecret(), RouterURL: modelURL, RouterKey: modelKey, Env: req.Env,
		Metadata: req.Metadata, Labels: req.Labels, Deadline: secs}, nil
}

// afterClaim makes the environment of a box whose bridge took claim: the
// workspace is cloned, then the provider environment attached.
func (p *Provider) afterClaim(ctx context.Context, t *timeline, box vendors.Box, ep vendors.Endpoint, rec StandbyRecord, req CreateRequest, h *pins.Harness, claim wire.Claim) (*Environment, error) {
	p.emit(Event{Type: EventClaimed, BoxID: box.ID(), RunTag: rec.RunTag})
	// A workspace is cloned after the handover, as a cold create clones
	// after the bridge is ready.
	if w := req.Workspace; w != nil {
		pctx, end := t.start(ctx, PhaseClone)
		err := p.clone(pctx, box, w)
		end(err)
		if err != nil {
			return nil, err
		}
	}
	ref := Reference{Vendor: p.o.Vendor.Name(), BoxID: box.ID(), Endpoint: ep.URL, Bearer: claim.Bearer, Harness: h.Name,
		Profile: req.Profile, Env: req.Env, Metadata: req.Metadata, RunTag: rec.RunTag, Deadline: time.Unix(claim.Deadline, 0),
		EnvironmentKey: "box-" + strings.ToLower(newSecret()[:24])}
	pctx, end := t.start(ctx, PhaseAttach)
	e, err := p.attach(pctx, box, ep, ref, h)
	end(err)
	if err != nil {
		return nil, err
	}
	e.phases = t.phases
	e.req = &req
	p.emit(Event{Type: EventReady, BoxID: box.ID(), RunTag: rec.RunTag})
	return e, nil
}

// StandbyEnv is the environment of a standby bridge of harness: what a
// vendor's own standby pool (vendors.StandbyPooler) starts its bridges
// with, beside BridgePort and Workspace.
func (p *Provider) StandbyEnv(harness string) (map[string]string, error) {
	h, ok := p.o.Pins.Harness(harness)
	if !ok {
		return nil, fmt.Errorf("standby env: harness %q: %w", harness, pins.ErrUnknownHarness)
	}
	return p.standbyEnv(h), nil
}

// claimVendorStandby makes req's environment in a box of the vendor's own
// standby pool (vendors.StandbyPooler), whose bridge runs from the box's
// start: the vendor's claim (PhaseVendorClaim), then the handover
// (PhaseClaim: on the provider's first claim of the harness the bridge's
// /health and pin, then one claim request) and the environment. ok is false when the vendor has no such pool for the
// request: create the box.
func (p *Provider) claimVendorStandby(ctx context.Context, t *timeline, req CreateRequest, h *pins.Harness, spec vendors.CreateSpec) (*Environment, bool, error) {
	sp, ok := p.o.Vendor.(vendors.StandbyPooler)
	if !ok {
		return nil, false, nil
	}
	deadline := time.Now().Add(spec.Lifetime)
	vctx, end := t.start(ctx, PhaseVendorClaim)
	box, token, ok, err := sp.ClaimStandby(vctx, spec, h.Name)
	end(err)
	if err != nil {
		return nil, true, fmt.Errorf("create box: %w", err)
	}
	if !ok {
		// No claim was made: the create's phases start at its vendor's.
		t.phases = t.phases[:len(t.phases)-1]
		return nil, false, nil
	}
	rec := StandbyRecord{Vendor: p.o.Vendor.Name(), BoxID: box.ID(), Harness: h.Name, RunTag: spec.RunTag, Token: token, Keeper: spec.Owner}
	e, err := func() (*Environment, error) {
		pctx, end := t.start(ctx, PhaseClaim)
		ep, err := box.Endpoint(pctx, BridgePort)
		if err != nil {
			err = fmt.Errorf("bridge endpoint: %w", err)
		}
		var claim wire.Claim
		if err == nil {
			claim, err = p.newClaim(pctx, box, netip.Addr{}, req, deadline)
		}
		// One connection through the endpoint carries the requests of
		// the claim and of the environment after it. A pool's pod is
		// ready only once its bridge answered /health with its backend
		// ready; the pin of this provider's image is checked on the
		// first claim of each harness.
		ep = ep.Shared()
		client := ep.Client()
		if _, ok := p.pinned.Load(h.Name); err == nil && !ok {
			if err = p.standbyReady(pctx, client, ep.URL, h); err == nil {
				p.pinned.Store(h.Name, true)
			}
		}
		if err == nil {
			err = postClaim(pctx, client, ep.URL, rec, claim)
		}
		end(err)
		if err != nil {
			client.CloseIdleConnections()
			return nil, err
		}
		return p.afterClaim(ctx, t, box, ep, rec, req, h, claim)
	}()
	if err != nil {
		err = p.cleanup(ctx, box, err)
		p.emit(Event{Type: EventDestroyed, BoxID: box.ID(), RunTag: spec.RunTag, Reason: ReasonFailure, Detail: err.Error()})
		return nil, true, err
	}
	e.watchIdle()
	return e, true, nil
}

// standbyReady waits for the standby bridge at url to answer /health
// with its backend ready and checks its version against the pin.
func (p *Provider) standbyReady(ctx context.Context, client *http.Client, url string, h *pins.Harness) error {
	health, err := healthWait{URL: url, Client: client, Backend: h.Name, Timeout: p.o.ReadyTimeout}.WaitUntilReady(ctx, nil)
	if err != nil {
		return fmt.Errorf("wait for bridge: %w", err)
	}
	if !versionMatches(h, health.Version) {
		return &PinMismatchError{Harness: h.Name, Pinned: h.Version, Reported: health.Version}
	}
	return nil
}

// postClaim posts claim to the standby bridge at url with rec's token.
func postClaim(ctx context.Context, client *http.Client, url string, rec StandbyRecord, claim wire.Claim) error {
	body, err := json.Marshal(claim)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url+wire.PathClaim, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	hreq.Header.Set("Authorization", "Bearer "+rec.Token)
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		// The transport's error names the URL, never the body.
		return fmt.Errorf("claim of standby box %s: %w", rec.BoxID, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		var e wire.ErrorResponse
		_ = json.Unmarshal(raw, &e)
		return &ClaimError{BoxID: rec.BoxID, Status: resp.StatusCode, Type: e.Error.Type}
	}
	return nil
}

// Lifetime is the lifetime of a box whose request sets none.
func (p *Provider) Lifetime() time.Duration { return p.o.Lifetime }
