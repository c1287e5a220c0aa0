package vendorhttp

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tangle-network/boxctl/internal/tracing"
)

// tracer makes the spans of vendors' HTTP calls.
var tracer = tracing.Tracer("vendors")

// Traced returns a copy of c whose transport makes a client span of each
// request (named "<vendor> <METHOD>", with the method, the URL's host and
// path and the status code; never a header or a query), a child of the
// request context's span. A client already traced is returned as it is.
func Traced(c *http.Client, vendor string) *http.Client {
	if _, ok := c.Transport.(*tracedTransport); ok {
		return c
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out := *c
	out.Transport = &tracedTransport{base: base, vendor: vendor}
	return &out
}

type tracedTransport struct {
	base   http.RoundTripper
	vendor string
}

func (t *tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := tracer.Start(req.Context(), t.vendor+" "+req.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("boxctl.vendor", t.vendor), attribute.String("http.request.method", req.Method),
			attribute.String("server.address", req.URL.Host), attribute.String("url.path", req.URL.Path)))
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		tracing.End(span, err)
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, strconv.Itoa(resp.StatusCode))
	}
	span.End()
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the transport
// underneath.
func (t *tracedTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
