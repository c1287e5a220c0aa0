package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The environment Setup reads (the OpenTelemetry SDK's standard names).
const (
	EndpointEnv       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	TracesEndpointEnv = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// Module is the instrumentation scope prefix of every tracer of boxctl.
const Module = "github.com/tangle-network/boxctl"

// Tracer returns the tracer of one of boxctl's packages (named by its
// path below the module, "provider/sandbox") from the global provider.
func Tracer(pkg string) trace.Tracer { return otel.Tracer(Module + "/" + pkg) }

// Enabled reports whether getenv names an OTLP endpoint, that is whether
// Setup installs an exporter.
func Enabled(getenv func(string) string) bool {
	return getenv(EndpointEnv) != "" || getenv(TracesEndpointEnv) != ""
}

// Setup installs the global tracer provider of a process named service:
// with an OTLP endpoint in the environment (getenv, usually os.Getenv), an
// SDK provider exporting over OTLP/HTTP in batches (the endpoint, headers,
// timeout, compression and TLS files read from the standard
// OTEL_EXPORTER_OTLP_* variables, as the SDK's exporter reads them);
// without one, nothing. The returned shutdown flushes what is buffered
// and stops the exporter, within FlushTimeout; it is never nil.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func() error, err error) {
	otel.SetTextMapPropagator(propagator)
	if !Enabled(getenv) {
		return func() error { return nil }, nil
	}
	cfg, err := exportConfigFrom(getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	exp := newExporter(cfg)
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", service)))
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
		defer cancel()
		return tp.Shutdown(sctx)
	}, nil
}

// FlushTimeout bounds the shutdown Setup returns: the spans still
// buffered then are dropped.
const FlushTimeout = 5 * time.Second

// propagator is the W3C trace context.
var propagator = propagation.TraceContext{}

// Inject writes ctx's span context into h as a traceparent header (none
// when ctx carries no valid span).
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the remote span context h's traceparent
// carries, or ctx itself when it carries none.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// End ends span, recording err (when not nil, and not a cancellation the
// caller asked for) as its error status.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		if !errors.Is(err, context.Canceled) {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
