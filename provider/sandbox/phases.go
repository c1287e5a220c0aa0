package sandbox

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/internal/tracing"
)

// tracer makes the spans of Create, Connect and Destroy.
var tracer = tracing.Tracer("provider/sandbox")

// The phases of a Create, in order; each is a span named "create." plus
// the phase, a child of the "sandbox.create" span.
const (
	PhaseChecks = "checks"
	PhaseVendor = "vendor.create"
	// PhaseVendorClaim is the claim of a box of the vendor's own standby
	// pool (vendors.StandbyPooler): with the vendor's pool, it comes
	// before PhaseClaim instead of PhaseVendor.
	PhaseVendorClaim = "vendor.claim"
	// PhaseClaim stands for the vendor create, the spawn, the endpoint,
	// the health wait and the pin check of a box claimed from a pool
	// (Provider.Claim): the handover of its secrets to its standby bridge;
	// after PhaseVendorClaim, the bridge's health and pin check and the
	// handover.
	PhaseClaim    = "pool.claim"
	PhaseSpawn    = "spawn"
	PhaseEndpoint = "endpoint"
	PhaseHealth   = "health"
	PhasePins     = "pins"
	PhaseClone    = "clone"
	// PhaseStatus reads the box's deadline from its vendor, when the
	// box's handle does not know it (vendors.Deadlined).
	PhaseStatus = "status"
	PhaseAttach = "attach"
)

// Phase is one step of a Create and how long it took.
type Phase struct {
	Name     string        `json:"name"`
	Duration time.Duration `json:"duration"`
	// Failed reports that the create failed in this phase.
	Failed bool `json:"failed,omitempty"`
}

// timeline records a Create's phases as spans and durations. It is used
// by one goroutine.
type timeline struct {
	phases []Phase
}

// start begins phase name under ctx; the returned end records it, with
// err (nil for success) on its span.
func (t *timeline) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	begin := time.Now()
	ctx, span := tracer.Start(ctx, "create."+name, trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		t.phases = append(t.phases, Phase{Name: name, Duration: time.Since(begin), Failed: err != nil})
		tracing.End(span, err)
	}
}

// Total is the sum of the phases' durations.
func Total(phases []Phase) time.Duration {
	var d time.Duration
	for _, p := range phases {
		d += p.Duration
	}
	return d
}
