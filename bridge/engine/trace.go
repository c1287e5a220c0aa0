package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/internal/tracing"
)

// tracer makes the engine's spans: a run's admission ("bridge.admission",
// a child of the request's span), the run itself ("bridge.run", a child
// of its admission, ending with the run), and in the run the harness's
// start ("harness.start") and the wait for its first output line
// ("harness.first_output").
var tracer = tracing.Tracer("bridge/engine")

func admissionSpan(ctx context.Context, runID string, b *Backend) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attribute.String("boxctl.run_id", runID)}
	if b != nil && b.Adapter != nil {
		attrs = append(attrs, attribute.String("boxctl.harness", b.Adapter.Name()))
	}
	return tracer.Start(ctx, "bridge.admission", trace.WithAttributes(attrs...))
}

// endAdmission ends an admission span; a refusal (saturated, busy, a
// conflict) is its error.
func endAdmission(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startTrace starts the run's span under ctx's (its admission's); the run
// outlives the request, so only the span context is kept.
func (l *liveRun) startTrace(ctx context.Context) {
	parent := trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(ctx))
	l.tctx, l.span = tracer.Start(parent, "bridge.run", trace.WithAttributes(
		attribute.String("boxctl.run_id", l.id), attribute.String("boxctl.harness", l.harness)))
}

// endTrace ends the run's span with its terminal status and error type.
func (l *liveRun) endTrace(status, errType string) {
	if l.first != nil {
		l.first.End()
	}
	l.span.SetAttributes(attribute.String("boxctl.run_status", status))
	if errType != "" {
		l.span.SetStatus(codes.Error, errType)
	}
	l.span.End()
}

// spawnSpan starts the span of the harness's start; call its end with
// the start's error. spare says the turn was handed to a harness started
// ahead of it (spare.go), whose span is the handover.
func (l *liveRun) spawnSpan(bin string, spare bool) func(error) {
	_, span := tracer.Start(l.tctx, "harness.start", trace.WithAttributes(attribute.String("boxctl.harness_bin", bin),
		attribute.Bool("boxctl.harness_spare", spare)))
	return func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, "the harness did not start")
		}
		span.End()
	}
}

// awaitOutput starts the wait for the harness's next first line (once a
// run); heard ends it.
func (l *liveRun) awaitOutput() {
	if l.first == nil {
		_, l.first = tracer.Start(l.tctx, "harness.first_output")
	}
}

// heard ends the wait for the first output line.
func (l *liveRun) heard() {
	if l.first != nil {
		l.first.End()
	}
}
