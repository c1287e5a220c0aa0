package provider

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Freshness states of an observed value.
const (
	// Known is a value with its provenance.
	Known = "known"
	// Unavailable is a value this bridge cannot know; Reason says why.
	Unavailable = "unavailable"
)

// Observed is one observed value with its freshness state. Value is set
// only when State is Known; Reason only when it is Unavailable.
type Observed[T any] struct {
	State      string      `json:"state"`
	Value      T           `json:"value,omitzero"`
	Reason     string      `json:"reason,omitempty"`
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Provenance says where and when a value was observed.
type Provenance struct {
	Origin     string    `json:"origin"`
	ObservedAt time.Time `json:"observedAt"`
	// Source names the source: "cli-bridge", or for model usage the
	// execution id the usage belongs to.
	Source string `json:"source"`
}

// Identity names the environment.
type Identity struct {
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
}

// Endpoint is the bridge's network location: scheme, host and an explicit
// port only; never userinfo, path, query or the bearer.
type Endpoint struct {
	Scheme string `json:"scheme"`
	Host   string `json:"host"`
	Port   int    `json:"port,omitempty"`
}

// Observation is what an environment can say about itself, each surface
// with its freshness state.
type Observation struct {
	Subject    Identity           `json:"subject"`
	CapturedAt time.Time          `json:"capturedAt"`
	Identity   Observed[Identity] `json:"identity"`
	// Lifecycle is known only once the environment is destroyed (stopped):
	// this client never probes the bridge.
	Lifecycle Observed[string]   `json:"lifecycle"`
	Endpoint  Observed[Endpoint] `json:"endpoint"`
	// PlacementRequested is where the caller asked turns to run: sandbox
	// or local. PlacementVerified is never proven by the bridge.
	PlacementRequested string           `json:"placementRequested"`
	PlacementVerified  Observed[string] `json:"placementVerified"`
	// ModelUsage is the usage the newest execution measured through this
	// environment handle.
	ModelUsage Observed[Usage] `json:"modelUsage"`
	// Compute shape, resource use, compute cost and account usage are
	// always unavailable: the bridge provisions nothing and holds no
	// account.
	Resources      Observed[string] `json:"resources"`
	ResourceUse    Observed[string] `json:"resourceUse"`
	ComputeBilling Observed[string] `json:"computeBilling"`
	AccountPlan    Observed[string] `json:"accountPlan"`
	AccountQuota   Observed[string] `json:"accountQuota"`
}

// usageRecord is the newest execution's usage measured by an environment
// handle.
type usageRecord struct {
	executionID string
	usage       Usage
	at          time.Time
}

// recordUsage keeps the newest per-execution usage. Usage without its
// execution, or an execution without usage, is not recorded.
func (e *Environment) recordUsage(executionID string, u *Usage) {
	if executionID == "" || u == nil {
		return
	}
	e.mu.Lock()
	e.usage = &usageRecord{executionID: executionID, usage: *u, at: time.Now().UTC()}
	e.mu.Unlock()
}

// safeEndpoint reads the scheme, host and explicit port of a base URL.
func safeEndpoint(base string) (Endpoint, bool) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Hostname() == "" {
		return Endpoint{}, false
	}
	ep := Endpoint{Scheme: u.Scheme, Host: u.Hostname()}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Endpoint{}, false
		}
		ep.Port = n
	}
	return ep, true
}

// observationCaps is the observation block this client backs.
func observationCaps(opts Options) *wire.ObservationCaps {
	_, ok := safeEndpoint(opts.BaseURL)
	return &wire.ObservationCaps{Identity: true, Lifecycle: true, Endpoint: ok, Placement: true, ModelUsage: true}
}

// Observe reports what the environment knows about itself. It makes no
// request.
func (e *Environment) Observe(ctx context.Context) (Observation, error) {
	if err := ctx.Err(); err != nil {
		return Observation{}, err
	}
	now := time.Now().UTC()
	prov := &Provenance{Origin: "reported", ObservedAt: now, Source: "cli-bridge"}
	subject := Identity{Provider: e.p.Name(), EnvironmentID: e.id}
	absent := func(reason string) Observed[string] { return Observed[string]{State: Unavailable, Reason: reason} }
	const (
		noCompute = "cli-bridge forwards a turn and provisions no compute"
		noAccount = "cli-bridge reports no account plan, credit, or quota"
		noProbe   = "cli-bridge never probes the bridge, so its runtime state is unproven"
	)
	o := Observation{
		Subject: subject, CapturedAt: now,
		Identity:           Observed[Identity]{State: Known, Value: subject, Provenance: prov},
		PlacementRequested: "local",
		PlacementVerified:  absent(noProbe),
		Resources:          absent(noCompute), ResourceUse: absent(noCompute), ComputeBilling: absent(noCompute),
		AccountPlan: absent(noAccount), AccountQuota: absent(noAccount),
	}
	if ex := e.p.c.opts.DefaultExecution; ex != nil && ex.Kind == ExecutionSandbox {
		o.PlacementRequested = "sandbox"
	}
	e.mu.Lock()
	destroyed, rec := e.destroyed, e.usage
	e.mu.Unlock()
	if destroyed {
		o.Lifecycle = Observed[string]{State: Known, Value: "stopped", Provenance: prov}
	} else {
		o.Lifecycle = absent(noProbe)
	}
	if ep, ok := safeEndpoint(e.p.c.opts.BaseURL); ok {
		o.Endpoint = Observed[Endpoint]{State: Known, Value: ep, Provenance: prov}
	} else {
		o.Endpoint = Observed[Endpoint]{State: Unavailable, Reason: "the cli-bridge base URL states no reachable host"}
	}
	if rec == nil {
		o.ModelUsage = Observed[Usage]{State: Unavailable, Reason: "no execution measured token usage through this environment handle"}
	} else {
		o.ModelUsage = Observed[Usage]{State: Known, Value: rec.usage, Provenance: &Provenance{Origin: "reported", ObservedAt: rec.at, Source: rec.executionID}}
	}
	return o, nil
}
