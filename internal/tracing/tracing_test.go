package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestSetup(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	tests := []struct {
		name     string
		endpoint string
		want     int32
	}{
		{"no endpoint: no exporter", "", 0},
		{"endpoint: OTLP/HTTP", srv.URL, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev := otel.GetTracerProvider()
			t.Cleanup(func() { otel.SetTracerProvider(prev) })
			posts.Store(0)
			t.Setenv(EndpointEnv, tc.endpoint)
			t.Setenv(TracesEndpointEnv, "")
			getenv := func(k string) string { return map[string]string{EndpointEnv: tc.endpoint}[k] }
			shutdown, err := Setup(t.Context(), "test", getenv)
			if err != nil {
				t.Fatal(err)
			}
			_, span := Tracer("internal/tracing").Start(t.Context(), "probe")
			if got := span.SpanContext().IsValid(); got != (tc.endpoint != "") {
				t.Errorf("span recorded = %v, want %v", got, tc.endpoint != "")
			}
			span.End()
			if err := shutdown(); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			if got := posts.Load(); got != tc.want {
				t.Errorf("POST /v1/traces %d times, want %d", got, tc.want)
			}
		})
	}
}

func TestInjectExtract(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewInMemoryExporter())))
	ctx, span := tp.Tracer("t").Start(context.Background(), "parent")
	defer span.End()
	h := http.Header{}
	Inject(ctx, h)
	if h.Get("traceparent") == "" {
		t.Fatal("Inject wrote no traceparent")
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), h))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("Extract = %v, want the remote span %v", got, span.SpanContext())
	}
	h = http.Header{}
	Inject(context.Background(), h)
	if len(h) != 0 {
		t.Errorf("Inject without a span wrote %v, want nothing", h)
	}
}
