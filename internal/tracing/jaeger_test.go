package tracing

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/internal/testbed"
)

// jaegerTrace is a trace as Jaeger's query API returns it.
type jaegerTrace struct {
	Spans []struct {
		SpanID, OperationName, ProcessID string
		References                       []struct{ RefType, SpanID string }
		Tags                             []struct {
			Key   string
			Value any
		}
	}
	Processes map[string]struct{ ServiceName string }
}

// readTrace polls Jaeger's query API until trace id holds n spans.
func readTrace(t *testing.T, base string, id trace.TraceID, n int) jaegerTrace {
	t.Helper()
	var got jaegerTrace
	polltest.UntilNil(t, 60*time.Second, fmt.Sprintf("trace %s to hold %d spans in Jaeger", id, n), func() error {
		resp, err := http.Get(base + "/api/traces/" + id.String())
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct{ Data []jaegerTrace }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		if len(body.Data) != 1 || len(body.Data[0].Spans) < n {
			return fmt.Errorf("%s: %d traces", resp.Status, len(body.Data))
		}
		got = body.Data[0]
		return nil
	})
	return got
}

// TestSetup_Jaeger exports a span and its child through Setup to the test
// bed's Jaeger and reads them back: the service, the names, the parent
// and the attributes arrive as they were made.
func TestSetup_Jaeger(t *testing.T) {
	env := testbed.RequireTracing(t)
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	service := "tracing-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	shutdown, err := Setup(t.Context(), service, func(k string) string { return map[string]string{EndpointEnv: env.OTLPEndpoint}[k] })
	if err != nil {
		t.Fatal(err)
	}
	tr := Tracer("internal/tracing")
	ctx, parent := tr.Start(t.Context(), "parent", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("url.path", "/v1/runs/r"), attribute.Int64("n", 3)))
	_, child := tr.Start(ctx, "child")
	child.End()
	parent.End()
	if err := shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	got := readTrace(t, env.JaegerURL, parent.SpanContext().TraceID(), 2)
	byName := map[string]int{}
	for i, s := range got.Spans {
		byName[s.OperationName] = i
		if svc := got.Processes[s.ProcessID].ServiceName; svc != service {
			t.Errorf("span %s of service %q, want %q", s.OperationName, svc, service)
		}
	}
	p, c := got.Spans[byName["parent"]], got.Spans[byName["child"]]
	if len(c.References) != 1 || c.References[0].RefType != "CHILD_OF" || c.References[0].SpanID != p.SpanID {
		t.Errorf("child references %+v, want CHILD_OF the parent %s", c.References, p.SpanID)
	}
	tags := map[string]string{}
	for _, kv := range p.Tags {
		tags[kv.Key] = fmt.Sprint(kv.Value)
	}
	for k, want := range map[string]string{"url.path": "/v1/runs/r", "n": "3", "span.kind": "server"} {
		if tags[k] != want {
			t.Errorf("parent tag %s = %q, want %q (tags %v)", k, tags[k], want, tags)
		}
	}
}
