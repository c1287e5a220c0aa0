// Package tracing is the OpenTelemetry plumbing that boxctl, its library
// callers and the bridge share: Setup installs a process's tracer provider
// from the standard environment (an OTLP/HTTP exporter when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// nothing otherwise, so the global provider stays the no-op one and a span
// costs a non-recording value), and Inject and Extract carry the W3C trace
// context (the traceparent header) across HTTP whether or not a process
// installed a propagator.
//
// The exporter is this package's own (otlp.go): OTLP/HTTP with protobuf
// bodies written with protowire (encode.go), so that the bridge that runs
// in every box links neither gRPC (the SDK's otlptracehttp exporter does,
// through its configuration and the OTLP collector package) nor the
// protobuf runtime. It reads the same OTEL_EXPORTER_OTLP_* variables, but
// sends protobuf whatever OTEL_EXPORTER_OTLP_PROTOCOL says.
//
// Libraries never call Setup: they take their tracer from the global
// provider (Tracer), so a program that embeds them decides where spans go.
package tracing
