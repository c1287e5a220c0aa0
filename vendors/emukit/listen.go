package emukit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Listener serves an emulator on a TCP address until Close.
type Listener struct {
	ln     net.Listener
	srv    *http.Server
	served chan error
}

// Listen listens on addr (host:port; port 0 picks a free one) and serves
// h there.
func Listen(addr string, h http.Handler) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}, served: make(chan error, 1)}
	go func() { l.served <- l.srv.Serve(ln) }()
	return l, nil
}

// Addr returns the address clients dial: the one listened on, loopback
// for an unspecified host.
func (l *Listener) Addr() string { return DialAddr(l.ln.Addr()) }

// URL returns the base URL clients call, http://Addr.
func (l *Listener) URL() string { return "http://" + l.Addr() }

// Close stops serving: it waits for the requests in flight to end for
// up to 30s, then cuts them.
func (l *Listener) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		_ = l.srv.Close()
	}
	if err := <-l.served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// DialAddr is the address clients dial for a listener's: loopback for an
// unspecified host.
func DialAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
