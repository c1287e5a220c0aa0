package provider

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/internal/tracing"
)

// tracer makes the turn spans.
var tracer = tracing.Tracer("provider")

// Attributes of a turn's span.
const (
	AttrFirstEvent   = "boxctl.turn.first_event_ms"
	AttrInputTokens  = "gen_ai.usage.input_tokens"
	AttrOutputTokens = "gen_ai.usage.output_tokens"
	AttrServedModel  = "gen_ai.response.model"
	AttrOutcome      = "boxctl.turn.outcome"
	AttrRunID        = "boxctl.run_id"
)

// turnSpan is the span of one streamed turn: it watches the events the
// caller sees and records the time to the first, the tokens, the served
// model and the outcome when the turn ends. Its context is the parent of
// the turn's bridge requests (their traceparent).
type turnSpan struct {
	span    trace.Span
	begin   time.Time
	first   bool
	outcome string
	usage   *Usage
	served  []string
}

func startTurnSpan(ctx context.Context, env string, turn *Turn) (context.Context, *turnSpan) {
	ctx, span := tracer.Start(ctx, "turn", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("boxctl.environment", env), attribute.String("gen_ai.request.model", turn.Model)))
	return ctx, &turnSpan{span: span, begin: time.Now()}
}

// see records one event the caller receives.
func (t *turnSpan) see(ev Event) {
	if !t.first {
		t.first = true
		t.span.SetAttributes(attribute.Int64(AttrFirstEvent, time.Since(t.begin).Milliseconds()))
		t.span.AddEvent("first event")
	}
	if ev.RunID != "" {
		t.span.SetAttributes(attribute.String(AttrRunID, ev.RunID))
	}
	if ev.Usage != nil {
		t.usage = ev.Usage
	}
	if len(ev.ProviderModels) > 0 {
		t.served = ev.ProviderModels
	}
	switch {
	case ev.Type == EventStatus && (ev.Status == StatusCompleted || ev.Status == StatusFailed || ev.Status == StatusCancelled):
		t.outcome = ev.Status
	case ev.Type == EventResult && t.outcome == "":
		t.outcome = StatusCompleted
	}
}

// end ends the span with err (the stream's error, nil for none).
func (t *turnSpan) end(err error) {
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		t.outcome = StatusCancelled
	case err != nil:
		t.outcome = "error"
	case t.outcome == "":
		t.outcome = "stopped" // the caller stopped reading
	}
	t.span.SetAttributes(attribute.String(AttrOutcome, t.outcome))
	if t.usage != nil {
		t.span.SetAttributes(attribute.Int64(AttrInputTokens, t.usage.InputTokens), attribute.Int64(AttrOutputTokens, t.usage.OutputTokens))
	}
	if len(t.served) > 0 {
		t.span.SetAttributes(attribute.String(AttrServedModel, strings.Join(t.served, ",")))
	}
	tracing.End(t.span, err)
}
