package vendorhttp

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c, err := New(Config{Vendor: "e2b", BaseURL: srv.URL, Header: http.Header{"X-Api-Key": {"secret-key"}}}, WithRetry(0, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if Traced(c.HTTPClient(), "e2b") != c.HTTPClient() {
		t.Error("Traced wrapped a traced client again")
	}
	tests := []struct {
		path   string
		status int64
		fails  bool
	}{
		{"/sandboxes", 200, false},
		{"/missing", 404, true},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			_, err := c.Do(t.Context(), Call{Method: http.MethodGet, Path: tc.path})
			if (err != nil) != tc.fails {
				t.Fatalf("Do = %v, want failure %v", err, tc.fails)
			}
			spans := rec.Ended()
			s := spans[len(spans)-1]
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value
			}
			if s.Name() != "e2b GET" || attrs["url.path"].AsString() != tc.path || attrs["http.response.status_code"].AsInt64() != tc.status {
				t.Errorf("span %s %v, want e2b GET of %s answered %d", s.Name(), s.Attributes(), tc.path, tc.status)
			}
			for _, kv := range s.Attributes() {
				if kv.Value.Emit() == "secret-key" {
					t.Errorf("span attribute %s carries the API key", kv.Key)
				}
			}
		})
	}
}
