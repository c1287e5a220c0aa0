package relay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/vendors/egress"
)

// Defaults.
const (
	// DefaultHelloTimeout bounds the wait for a connection's first bytes
	// (its HTTP request head or TLS ClientHello).
	DefaultHelloTimeout = 10 * time.Second
	// DefaultDialTimeout bounds the resolve and connect to the
	// destination.
	DefaultDialTimeout = 10 * time.Second
)

// Dialer connects to an address; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// PolicyFunc returns the policy of the box at addr, and false for an
// address that is no box's.
type PolicyFunc func(addr netip.Addr) (egress.Policy, bool)

// Options configures a Relay. Policy is required.
type Options struct {
	// Policy finds a box's policy by its address.
	Policy PolicyFunc
	// Resolver resolves allowed names. Default: net.DefaultResolver.
	Resolver *net.Resolver
	// Dialer connects to a resolved address ("tcp4", "a.b.c.d:port").
	// Default: a net.Dialer.
	Dialer Dialer
	// HelloTimeout: default DefaultHelloTimeout.
	HelloTimeout time.Duration
	// DialTimeout: default DefaultDialTimeout.
	DialTimeout time.Duration
	// Logger receives a record of each refusal (box, name, reason).
	// Default: discard.
	Logger *slog.Logger
}

func (o Options) normalized() (Options, error) {
	if o.Policy == nil {
		return o, errors.New("relay: Policy is required")
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{}
	}
	if o.HelloTimeout == 0 {
		o.HelloTimeout = DefaultHelloTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Relay relays boxes' HTTP and TLS connections to allowed hosts. It is
// safe for concurrent use.
type Relay struct {
	o Options

	mu    sync.Mutex
	conns map[netip.Addr]map[*relayed]struct{}
}

// relayed is one live relayed connection.
type relayed struct {
	host      string
	port      uint16
	box, dest net.Conn
}

// New returns a relay.
func New(o Options) (*Relay, error) {
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	return &Relay{o: o, conns: map[netip.Addr]map[*relayed]struct{}{}}, nil
}

// Kind is what a listener of the relay speaks.
type Kind int

// Kinds of listener.
const (
	// HTTP reads the Host of the first request; the box dials port 80.
	HTTP Kind = iota
	// TLS reads the SNI of the ClientHello; the box dials port 443.
	TLS
)

func (k Kind) port() uint16 {
	if k == TLS {
		return 443
	}
	return 80
}

// Serve relays the connections of l, as kind, until ctx ends or l is
// closed; it closes l.
func (r *Relay) Serve(ctx context.Context, l net.Listener, kind Kind) error {
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("relay: accept: %w", err)
		}
		go r.handle(ctx, c, kind)
	}
}

func (r *Relay) handle(ctx context.Context, c net.Conn, kind Kind) {
	defer c.Close()
	src := addrOf(c.RemoteAddr())
	log := r.o.Logger.With("box", src, "kind", kind.port())
	p, ok := r.o.Policy(src)
	if !ok {
		log.Info("relay refused: no box at this address")
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(r.o.HelloTimeout))
	var head bytes.Buffer
	host, err := readHost(io.TeeReader(c, &head), kind)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		log.Info("relay refused: no host", "err", err)
		return
	}
	port := kind.port()
	if !p.AllowsHost(host, port) {
		log.Info("relay refused: not allowed", "host", host)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, r.o.DialTimeout)
	dest, err := r.dial(dctx, host, port)
	cancel()
	if err != nil {
		log.Info("relay refused: dial", "host", host, "err", err)
		return
	}
	defer dest.Close()
	rc := &relayed{host: host, port: port, box: c, dest: dest}
	if !r.track(src, rc) {
		return
	}
	defer r.untrack(src, rc)
	if _, err := dest.Write(head.Bytes()); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(dest, c); closeWrite(dest); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, dest); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// track records rc, unless the box's policy changed since the check.
func (r *Relay) track(src netip.Addr, rc *relayed) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.o.Policy(src); !ok || !p.AllowsHost(rc.host, rc.port) {
		return false
	}
	if r.conns[src] == nil {
		r.conns[src] = map[*relayed]struct{}{}
	}
	r.conns[src][rc] = struct{}{}
	return true
}

func (r *Relay) untrack(src netip.Addr, rc *relayed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns[src], rc)
	if len(r.conns[src]) == 0 {
		delete(r.conns, src)
	}
}

// Revoke closes the relayed connections of the box at addr that its
// policy (as Options.Policy now answers) no longer allows.
func (r *Relay) Revoke(addr netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.o.Policy(addr)
	for rc := range r.conns[addr] {
		if !ok || !p.AllowsHost(rc.host, rc.port) {
			_ = rc.box.Close()
			_ = rc.dest.Close()
			delete(r.conns[addr], rc)
		}
	}
}

// ErrForbiddenAddress is a name that resolves only to addresses the relay
// never connects to.
var ErrForbiddenAddress = errors.New("resolves only to loopback, link-local, multicast or unspecified addresses")

// dial resolves host itself and connects to the first usable IPv4 address.
func (r *Relay) dial(ctx context.Context, host string, port uint16) (net.Conn, error) {
	addrs, err := r.o.Resolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		a = a.Unmap()
		if Forbidden(a) {
			continue
		}
		c, err := r.o.Dialer.DialContext(ctx, "tcp4", net.JoinHostPort(a.String(), strconv.Itoa(int(port))))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, ErrForbiddenAddress
	}
	return nil, errors.Join(errs...)
}

// Forbidden reports an address the relay never connects to, whatever a
// name resolves to.
func Forbidden(a netip.Addr) bool {
	return !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast()
}

func addrOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if ua, ok := a.(*net.UDPAddr); ok {
		return ua.AddrPort().Addr().Unmap()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// readHost reads the host a connection asks for: the Host of an HTTP
// request head, or the SNI of a TLS ClientHello.
func readHost(r io.Reader, kind Kind) (string, error) {
	if kind == HTTP {
		req, err := http.ReadRequest(bufio.NewReader(r))
		if err != nil {
			return "", err
		}
		host := req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" {
			return "", errors.New("request without Host")
		}
		return host, nil
	}
	return readSNI(r)
}

// errHello stops the TLS handshake once the ClientHello is read.
var errHello = errors.New("client hello read")

// readSNI reads a TLS ClientHello through crypto/tls (which parses it)
// and stops the handshake there.
func readSNI(r io.Reader) (string, error) {
	var sni string
	err := tls.Server(readOnly{r}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = h.ServerName
			return nil, errHello
		},
	}).Handshake()
	if sni == "" {
		if err == nil || errors.Is(err, errHello) {
			err = errors.New("ClientHello without SNI")
		}
		return "", err
	}
	return sni, nil
}

// readOnly is a net.Conn that reads from r and writes nothing.
type readOnly struct{ r io.Reader }

func (c readOnly) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (readOnly) Write(p []byte) (int, error)      { return 0, io.ErrClosedPipe }
func (readOnly) Close() error                     { return nil }
func (readOnly) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (readOnly) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (readOnly) SetDeadline(time.Time) error      { return nil }
func (readOnly) SetReadDeadline(time.Time) error  { return nil }
func (readOnly) SetWriteDeadline(time.Time) error { return nil }
