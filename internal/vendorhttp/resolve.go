package vendorhttp

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// Resolve sets t to connect every request for domain, or any host under
// it, to addr (host:port) instead of the address the name resolves to, as
// curl's --resolve does; other hosts dial as before. The request keeps its
// URL and Host header, so host-based routing ({port}-{id}.{domain}) still
// works. An empty addr leaves t as it is.
func Resolve(t *http.Transport, domain, addr string) {
	if addr == "" {
		return
	}
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	next := t.DialContext
	if next == nil {
		next = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(address)
		if err == nil {
			host = strings.ToLower(strings.TrimSuffix(host, "."))
			if host == domain || strings.HasSuffix(host, "."+domain) {
				return next(ctx, network, addr)
			}
		}
		return next(ctx, network, address)
	}
}
