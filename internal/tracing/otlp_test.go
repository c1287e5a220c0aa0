package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// receiver is an OTLP/HTTP receiver that keeps the bodies it was posted
// and answers each with the next of statuses (200 once they run out).
type receiver struct {
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	statuses []int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies, rc.headers = append(rc.bodies, b), append(rc.headers, r.Header.Clone())
	status := http.StatusOK
	if len(rc.statuses) > 0 {
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
		w.Header().Set("Retry-After", "0")
	}
	w.WriteHeader(status)
}

// testSpans are spans of two resources and two scopes with every kind of
// attribute value, events, links, a status and a remote parent.
func testSpans() []sdktrace.ReadOnlySpan {
	tid := trace.TraceID{1, 2, 3}
	sc := func(sid byte, remote bool) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{sid}, TraceFlags: trace.FlagsSampled, Remote: remote})
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	res := resource.NewSchemaless(attribute.String("service.name", "a"))
	other := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "b"))
	attrs := []attribute.KeyValue{attribute.Bool("b", true), attribute.Int64("i", 7), attribute.Float64("f", 1.5),
		attribute.String("s", "x"), attribute.BoolSlice("bs", []bool{true, false}), attribute.Int64Slice("is", []int64{1, 2}),
		attribute.Float64Slice("fs", []float64{0.5}), attribute.StringSlice("ss", []string{"p", "q"}),
		attribute.ByteSlice("by", []byte{0, 1}), attribute.Slice("sl", attribute.IntValue(0), attribute.StringValue("")),
		attribute.Map("m", attribute.Bool("f", false), attribute.String("e", "")), attribute.Int64("zero", 0)}
	stubs := tracetest.SpanStubs{
		{Name: "root", SpanContext: sc(1, false), Parent: sc(9, true), SpanKind: trace.SpanKindServer, StartTime: start,
			EndTime: start.Add(time.Second), Attributes: attrs, Resource: res, DroppedAttributes: 2,
			Events:               []sdktrace.Event{{Name: "e", Time: start.Add(time.Millisecond), Attributes: attrs[:2], DroppedAttributeCount: 1}},
			Links:                []sdktrace.Link{{SpanContext: sc(8, true), Attributes: attrs[3:4]}},
			Status:               sdktrace.Status{Code: codes.Error, Description: "failed"},
			InstrumentationScope: instrumentation.Scope{Name: "github.com/tangle-network/boxctl/bridge/server", Version: "v1"}},
		{Name: "child", SpanContext: sc(2, false), Parent: sc(1, false), SpanKind: trace.SpanKindClient, StartTime: start,
			EndTime: start.Add(time.Millisecond), Resource: res, Status: sdktrace.Status{Code: codes.Ok},
			InstrumentationScope: instrumentation.Scope{Name: "github.com/tangle-network/boxctl/bridge/engine"}},
		{Name: "elsewhere", SpanContext: sc(3, false), SpanKind: trace.SpanKindInternal, StartTime: start, EndTime: start,
			Resource: other, InstrumentationScope: instrumentation.Scope{Name: "x", SchemaURL: "https://opentelemetry.io/schemas/1.26.0"}},
	}
	return stubs.Snapshots()
}

// decodeRequest decodes an ExportTraceServiceRequest with its resource
// spans sorted by service, so that two of them compare whatever order
// they came in.
func decodeRequest(t *testing.T, b []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("decode the request: %v", err)
	}
	service := func(i int) string {
		return req.ResourceSpans[i].GetResource().GetAttributes()[0].GetValue().GetStringValue()
	}
	if len(req.ResourceSpans) == 2 && service(0) > service(1) {
		slices.Reverse(req.ResourceSpans)
	}
	return &req
}

// TestExporter_SameAsSDK exports the same spans through this package's
// exporter and the SDK's otlptracehttp: the receiver gets the same
// request, with the same headers that matter.
func TestExporter_SameAsSDK(t *testing.T) {
	var rc receiver
	srv := httptest.NewServer(&rc)
	defer srv.Close()
	cfg, err := exportConfigFrom(func(k string) string {
		return map[string]string{EndpointEnv: srv.URL, "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=a%20b"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := newExporter(cfg).ExportSpans(t.Context(), testSpans()); err != nil {
		t.Fatalf("ExportSpans: %v", err)
	}
	sdk, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"x-tenant": "a b"}))
	if err != nil {
		t.Fatal(err)
	}
	defer sdk.Shutdown(context.Background())
	if err := sdk.ExportSpans(t.Context(), testSpans()); err != nil {
		t.Fatalf("SDK ExportSpans: %v", err)
	}
	if len(rc.bodies) != 2 {
		t.Fatalf("the receiver got %d requests, want 2", len(rc.bodies))
	}
	if diff := cmp.Diff(decodeRequest(t, rc.bodies[1]), decodeRequest(t, rc.bodies[0]), protocmp.Transform()); diff != "" {
		t.Errorf("request (-SDK +ours):\n%s", diff)
	}
	for _, h := range []string{"Content-Type", "X-Tenant", "User-Agent"} {
		if got, want := rc.headers[0].Get(h), rc.headers[1].Get(h); got != want {
			t.Errorf("header %s = %q, want %q as the SDK sends it", h, got, want)
		}
	}
}

// TestExporter_Retry answers 503 twice: the exporter sends again after
// its back-off and succeeds.
func TestExporter_Retry(t *testing.T) {
	rc := receiver{statuses: []int{http.StatusServiceUnavailable, http.StatusTooManyRequests}}
	srv := httptest.NewServer(&rc)
	defer srv.Close()
	e := newExporter(exportConfig{url: srv.URL + "/v1/traces", timeout: time.Second})
	e.retry = time.Millisecond
	if err := e.ExportSpans(t.Context(), testSpans()); err != nil {
		t.Fatalf("ExportSpans: %v", err)
	}
	if len(rc.bodies) != 3 {
		t.Errorf("the receiver got %d requests, want 3 (two retries)", len(rc.bodies))
	}
	rc.statuses = []int{http.StatusBadRequest}
	if err := e.ExportSpans(t.Context(), testSpans()); err == nil || !strings.Contains(err.Error(), "400 Bad Request") {
		t.Errorf("ExportSpans answered 400 = %v, want the status in the error", err)
	}
}

func TestExportConfigFrom(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"base URL", map[string]string{"ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces", false},
		{"base URL with a path", map[string]string{"ENDPOINT": "https://collector/otlp/"}, "https://collector/otlp/v1/traces", false},
		{"traces URL as is", map[string]string{"ENDPOINT": "http://a:1", "TRACES_ENDPOINT": "http://b:2/custom"}, "http://b:2/custom", false},
		{"traces URL without a path", map[string]string{"TRACES_ENDPOINT": "http://b:2"}, "http://b:2/", false},
		{"insecure overrides the scheme", map[string]string{"ENDPOINT": "https://c:3", "INSECURE": "true"}, "http://c:3/v1/traces", false},
		{"TLS files on plain HTTP", map[string]string{"ENDPOINT": "http://c:3", "CERTIFICATE": "testdata/ca.pem"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := exportConfigFrom(func(k string) string { return tc.env[strings.TrimPrefix(k, "OTEL_EXPORTER_OTLP_")] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("exportConfigFrom(%v) error = %v, want error %v", tc.env, err, tc.wantErr)
			}
			if err == nil && c.url != tc.want {
				t.Errorf("exportConfigFrom(%v).url = %q, want %q", tc.env, c.url, tc.want)
			}
		})
	}
}

func TestParseHeaders(t *testing.T) {
	got := parseHeaders("a=1, b = x%2Cy ,bad, c=")
	want := map[string]string{"a": "1", "b": "x,y", "c": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseHeaders (-want +got):\n%s", diff)
	}
}

func TestPartialSuccess(t *testing.T) {
	var ps []byte
	ps = protowire.AppendTag(ps, 1, protowire.VarintType)
	ps = protowire.AppendVarint(ps, 3)
	ps = protowire.AppendTag(ps, 2, protowire.BytesType)
	ps = protowire.AppendString(ps, "too old")
	var resp []byte
	resp = protowire.AppendTag(resp, 1, protowire.BytesType)
	resp = protowire.AppendBytes(resp, ps)
	tests := []struct {
		name, contentType string
		body              []byte
		want              string
	}{
		{"protobuf", "application/x-protobuf", resp, "OTLP partial success: too old (3 spans rejected)"},
		{"json", "application/json", []byte(`{"partialSuccess":{"rejectedSpans":"2"}}`), "OTLP partial success: empty message (2 spans rejected)"},
		{"none", "application/x-protobuf", nil, ""},
		{"empty partial success", "application/json", []byte(`{"partialSuccess":{}}`), ""},
	}
	for _, tc := range tests {
		err := partialSuccess(tc.contentType, tc.body)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("partialSuccess(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
