package relay_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/egresstest"
	"github.com/tangle-network/boxctl/vendors/egress/relay"
)

// The relay's clients here come from 127.0.0.1: that is "the box".
var box = netip.MustParseAddr("127.0.0.1")

// policies is a mutable policy table.
type policies struct {
	mu sync.Mutex
	m  map[netip.Addr]egress.Policy
}

func (p *policies) get(a netip.Addr) (egress.Policy, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.m[a]
	return q, ok
}

func (p *policies) set(a netip.Addr, s string) {
	q, err := egress.Parse(s)
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[a] = q
}

// dialer maps the documentation addresses the test resolver hands out to
// loopback listeners, and records what the relay dialed.
type dialer struct {
	mu     sync.Mutex
	to     map[string]string
	dialed []string
}

func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	to, ok := d.to[addr]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test dialer: %s is not a test listener", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, to)
}

func (d *dialer) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

type rig struct {
	pol      *policies
	d        *dialer
	r        *relay.Relay
	http     string
	tls      string
	allowed  *egresstest.Counter
	allowedT *egresstest.Counter
}

func newRig(t *testing.T) *rig {
	res := egresstest.StartResolver(t, "127.0.0.1", 0, map[string]netip.Addr{
		"allowed.test": netip.MustParseAddr("192.0.2.10"),
		"local.test":   netip.MustParseAddr("127.0.0.1"),
		"meta.test":    netip.MustParseAddr("169.254.169.254"),
	})
	allowed := egresstest.ListenTCP(t, "127.0.0.1:0", []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	allowedT := egresstest.ListenTCP(t, "127.0.0.1:0", []byte("hello"))
	d := &dialer{to: map[string]string{"192.0.2.10:80": allowed.Addr.String(), "192.0.2.10:443": allowedT.Addr.String()}}
	pol := &policies{m: map[netip.Addr]egress.Policy{}}
	pol.set(box, "allowed.test,*.wild.test,local.test,meta.test")
	r, err := relay.New(relay.Options{Policy: pol.get, Resolver: res.NetResolver(), Dialer: d})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(k relay.Kind) string {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = r.Serve(t.Context(), l, k) }()
		return l.Addr().String()
	}
	return &rig{pol: pol, d: d, r: r, http: serve(relay.HTTP), tls: serve(relay.TLS), allowed: allowed, allowedT: allowedT}
}

// get sends one HTTP request with host to the relay and returns what came
// back (empty when the relay closed the connection).
func (g *rig) get(t *testing.T, host string) string {
	c, err := net.Dial("tcp4", g.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// hello starts a TLS handshake with sni through the relay.
func (g *rig) hello(t *testing.T, sni string) {
	c, err := net.Dial("tcp4", g.tls)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// The listener answers no TLS: the handshake fails once the hello
	// has reached (or not reached) it, or the relay closed the connection.
	_ = tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake()
}

func TestRelay_HTTPHost(t *testing.T) {
	g := newRig(t)
	tests := []struct {
		host string
		want bool
	}{
		{"allowed.test", true},
		{"ALLOWED.test:80", true},
		{"other.test", false},
		{"192.0.2.10", false},
		{"local.test", false}, // resolves to loopback
		{"meta.test", false},  // resolves to the metadata address
		{"a.wild.test", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			before := g.allowed.Bytes()
			got := g.get(t, tt.host)
			if reached := got != ""; reached != tt.want {
				t.Errorf("GET Host %s: reached = %v (%q), want %v", tt.host, reached, got, tt.want)
			}
			if !tt.want && g.allowed.Bytes() != before {
				t.Errorf("GET Host %s: %d bytes reached the allowed host", tt.host, g.allowed.Bytes()-before)
			}
		})
	}
	for _, a := range g.d.all() {
		if a != "192.0.2.10:80" {
			t.Errorf("relay dialed %s, want only the resolved address 192.0.2.10:80", a)
		}
	}
}

func TestRelay_TLSSNI(t *testing.T) {
	g := newRig(t)
	for _, sni := range []string{"other.test", "192.0.2.10.nip.test", "local.test"} {
		g.hello(t, sni)
	}
	g.hello(t, "allowed.test")
	polltest.Until(t, 5*time.Second, "the ClientHello of allowed.test at the allowed listener", func() bool { return g.allowedT.Bytes() > 0 })
	if n := g.allowedT.Conns(); n != 1 {
		t.Errorf("allowed TLS listener took %d connections, want 1 (refused SNIs must reach nothing)", n)
	}
	for _, a := range g.d.all() {
		if a != "192.0.2.10:443" {
			t.Errorf("relay dialed %s, want only 192.0.2.10:443", a)
		}
	}
}

func TestRelay_UnknownSourceAndRevoke(t *testing.T) {
	g := newRig(t)
	// A live relayed connection, then the box's policy loses the name.
	c, err := net.Dial("tcp4", g.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	buf := make([]byte, 64)
	if _, err := c.Read(buf); err != nil {
		t.Fatalf("read through relay: %v", err)
	}
	g.pol.set(box, "")
	g.r.Revoke(box)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Error("a revoked connection still reads")
	}
	g.pol.mu.Lock()
	delete(g.pol.m, box)
	g.pol.mu.Unlock()
	if got := g.get(t, "allowed.test"); got != "" {
		t.Errorf("a source with no policy got %q", got)
	}
}

func TestDNS(t *testing.T) {
	pol := &policies{m: map[netip.Addr]egress.Policy{}}
	pol.set(box, "allowed.test,*.wild.test")
	d, err := relay.NewDNS(pol.get, netip.MustParseAddr("10.1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	l, pc, err := relay.ListenDNS(t.Context(), box)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, pc, l) }()
	t.Cleanup(func() { cancel(); <-done })
	tests := []struct {
		name  string
		qtype uint16
		rcode int
		a     string
	}{
		{"allowed.test.", dns.TypeA, dns.RcodeSuccess, "10.1.2.3"},
		{"x.wild.test.", dns.TypeA, dns.RcodeSuccess, "10.1.2.3"},
		{"allowed.test.", dns.TypeAAAA, dns.RcodeSuccess, ""},
		{"allowed.test.", dns.TypeTXT, dns.RcodeRefused, ""},
		{"other.test.", dns.TypeA, dns.RcodeNameError, ""},
		{"other.test.", dns.TypeTXT, dns.RcodeNameError, ""},
		{"wild.test.", dns.TypeA, dns.RcodeNameError, ""},
	}
	for _, net := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(net+"/"+tt.name+dns.TypeToString[tt.qtype], func(t *testing.T) {
				m := new(dns.Msg)
				m.SetQuestion(tt.name, tt.qtype)
				r, _, err := (&dns.Client{Net: net}).Exchange(m, pc.LocalAddr().String())
				if err != nil {
					t.Fatal(err)
				}
				var a string
				for _, rr := range r.Answer {
					if ar, ok := rr.(*dns.A); ok {
						a = ar.A.String()
					}
				}
				if r.Rcode != tt.rcode || a != tt.a {
					t.Errorf("query %s %s = rcode %d, A %q; want %d, %q", tt.name, dns.TypeToString[tt.qtype], r.Rcode, a, tt.rcode, tt.a)
				}
			})
		}
	}
}
