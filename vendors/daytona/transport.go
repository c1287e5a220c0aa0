package daytona

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// localhostTransport returns rt with host names under "localhost" dialled
// on the loopback (RFC 6761 §6.3), which Go's resolver does not do: Daytona
// run locally hands out preview URLs like
// http://3000-{id}.proxy.localhost:4000. Any other name dials as before. A
// transport that is not an *http.Transport is returned as it is.
func localhostTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return rt
	}
	t = t.Clone()
	next := t.DialContext
	if next == nil {
		next = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(address); err == nil && isLocalhost(host) {
			address = net.JoinHostPort("127.0.0.1", port)
		}
		return next(ctx, network, address)
	}
	return t
}

func isLocalhost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
