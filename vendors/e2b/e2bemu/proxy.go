package e2bemu

import (
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// trafficTokenHeader carries a sandbox's traffic access token.
const trafficTokenHeader = "e2b-traffic-access-token"

// proxy forwards a request for a port of the sandbox to its container, as
// E2B's proxy does: a closed port is 502 "port is not open"; a sandbox
// without public traffic wants its traffic token.
// upstream carries proxied requests to the sandboxes' ports: a fresh
// connection each (no proxy from the environment, no pooled connection a
// sandbox's server may have closed meanwhile), as cheap as it is on the
// boxes' local network.
var upstream = &http.Transport{
	DialContext:       (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	DisableKeepAlives: true,
}

func (s *Server) proxy(w http.ResponseWriter, r *http.Request, sb *sandbox, port int) {
	if sb.trafficToken != "" {
		got := r.Header.Get(trafficTokenHeader)
		switch {
		case got == "":
			writeJSON(w, http.StatusForbidden, proxyError{SandboxID: sb.id, Code: http.StatusForbidden,
				Message: "Sandbox is secured with traffic access token. Token header '" + trafficTokenHeader + "' is missing"})
			return
		case subtle.ConstantTimeCompare([]byte(got), []byte(sb.trafficToken)) != 1:
			writeJSON(w, http.StatusForbidden, proxyError{SandboxID: sb.id, Code: http.StatusForbidden,
				Message: "Sandbox is secured with traffic access token. Provided token in header '" + trafficTokenHeader + "' is invalid"})
			return
		}
	}
	target := &url.URL{Scheme: "http", Host: net.JoinHostPort(sb.ip, strconv.Itoa(port))}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del(trafficTokenHeader)
			pr.SetXForwarded()
		},
		Transport:     upstream,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if sb.ctx.Err() != nil {
				abort()
			}
			if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) {
				writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: sb.id, Port: port, Code: http.StatusBadGateway,
					Message: "The sandbox is running but port is not open"})
				return
			}
			if r.Context().Err() != nil {
				return
			}
			writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: sb.id, Code: http.StatusBadGateway,
				Message: "Error when proxying the request to the sandbox: " + err.Error()})
		},
	}
	// The box's server may answer (an event stream's headers) before the
	// request's body is all through: keep reading it after the response
	// starts, or the server would close it under the proxy and cut both.
	_ = http.NewResponseController(w).EnableFullDuplex()
	rp.ServeHTTP(w, r)
}
