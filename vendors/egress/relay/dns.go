package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// DNS answers boxes' queries by their policy. It is safe for concurrent
// use.
type DNS struct {
	policy PolicyFunc
	answer netip.Addr
}

// NewDNS returns a server that answers allowed names with relayAddr (the
// relay's address as the boxes reach it).
func NewDNS(policy PolicyFunc, relayAddr netip.Addr) (*DNS, error) {
	if policy == nil || !relayAddr.Is4() {
		return nil, errors.New("relay: dns: a policy and an IPv4 relay address are required")
	}
	return &DNS{policy: policy, answer: relayAddr}, nil
}

// ServeDNS answers one query.
func (d *DNS) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	src := addrOf(w.RemoteAddr())
	p, ok := d.policy(src)
	switch {
	case !ok || len(q.Question) != 1:
		m.Rcode = dns.RcodeRefused
	case !p.AllowsName(strings.TrimSuffix(q.Question[0].Name, ".")):
		m.Rcode = dns.RcodeNameError
	case q.Question[0].Qtype == dns.TypeA && q.Question[0].Qclass == dns.ClassINET:
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
			A:   net.IP(d.answer.AsSlice()),
		})
	case q.Question[0].Qtype == dns.TypeAAAA:
		// An allowed name, but no IPv6: no answer, no error.
	default:
		m.Rcode = dns.RcodeRefused
	}
	_ = w.WriteMsg(m)
}

// Serve answers on the UDP socket pc and the TCP listener l until ctx
// ends; it closes both.
func (d *DNS) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	udp := &dns.Server{PacketConn: pc, Handler: d}
	tcp := &dns.Server{Listener: l, Handler: d}
	errc := make(chan error, 2)
	go func() { errc <- udp.ActivateAndServe() }()
	go func() { errc <- tcp.ActivateAndServe() }()
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	_ = udp.Shutdown()
	_ = tcp.Shutdown()
	if first != nil {
		return fmt.Errorf("relay: dns: %w", first)
	}
	return nil
}

// ListenDNS listens on one free port of addr for both TCP and UDP, as a
// DNS server serves.
func ListenDNS(ctx context.Context, addr netip.Addr) (net.Listener, net.PacketConn, error) {
	var lc net.ListenConfig
	var last error
	for range 20 {
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(addr.String(), "0"))
		if err != nil {
			return nil, nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		pc, err := lc.ListenPacket(ctx, "udp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
		if err == nil {
			return l, pc, nil
		}
		_ = l.Close()
		last = err
	}
	return nil, nil, fmt.Errorf("dns: no port free for both TCP and UDP: %w", last)
}
