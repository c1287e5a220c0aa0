// Package egresstest gives tests of egress enforcement a DNS resolver of
// their own, listeners that count what reaches them, and Docker networks
// of their own to listen on.
package egresstest

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/miekg/dns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/tangle-network/boxctl/vendors/egress/relay"
)

// Resolver is a DNS server of the test's: A answers from its map, TXT
// answers "seen" for any name, and a count of every query it received.
type Resolver struct {
	// Addr is where it listens, UDP and TCP.
	Addr    netip.AddrPort
	names   map[string]netip.Addr
	queries atomic.Int64
	mu      sync.Mutex
	asked   map[string]int64
}

// StartResolver serves names (lower case, no trailing dot) on host (a
// free port, UDP and TCP; port 0 picks one) until the test ends.
func StartResolver(t testing.TB, host string, port int, names map[string]netip.Addr) *Resolver {
	t.Helper()
	var (
		l   net.Listener
		pc  net.PacketConn
		err error
	)
	if port == 0 {
		l, pc, err = relay.ListenDNS(t.Context(), netip.MustParseAddr(host))
	} else {
		var lc net.ListenConfig
		l, err = lc.Listen(t.Context(), "tcp4", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			if pc, err = lc.ListenPacket(t.Context(), "udp4", l.Addr().String()); err != nil {
				_ = l.Close()
			}
		}
	}
	if err != nil {
		t.Fatalf("resolver: %v", err)
	}
	ap := l.Addr().(*net.TCPAddr).AddrPort()
	r := &Resolver{Addr: ap, names: names, asked: map[string]int64{}}
	udp, tcp := &dns.Server{PacketConn: pc, Handler: r}, &dns.Server{Listener: l, Handler: r}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	t.Cleanup(func() { _ = pc.Close(); _ = l.Close() })
	return r
}

// Queries returns how many queries reached it.
func (r *Resolver) Queries() int64 { return r.queries.Load() }

// Asked returns how many questions for name (lower case, no trailing
// dot) reached it.
func (r *Resolver) Asked(name string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[name]
}

// NetResolver returns a resolver that asks only r.
func (r *Resolver) NetResolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, r.Addr.String())
	}}
}

// ServeDNS answers one query.
func (r *Resolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	r.queries.Add(1)
	m := new(dns.Msg)
	m.SetReply(q)
	for _, qq := range q.Question {
		name := strings.TrimSuffix(strings.ToLower(qq.Name), ".")
		r.mu.Lock()
		r.asked[name]++
		r.mu.Unlock()
		switch qq.Qtype {
		case dns.TypeA:
			if a, ok := r.names[name]; ok {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IP(a.AsSlice())})
			}
		case dns.TypeTXT:
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 5}, Txt: []string{"seen"}})
		}
	}
	_ = w.WriteMsg(m)
}

// Counter is a TCP or UDP listener of the test's that counts the bytes it
// receives and, for TCP, answers each connection with Reply.
type Counter struct {
	// Addr is where it listens.
	Addr  netip.AddrPort
	bytes atomic.Int64
	conns atomic.Int64
}

// Bytes returns the bytes received so far.
func (c *Counter) Bytes() int64 { return c.bytes.Load() }

// Conns returns the connections (TCP) or datagrams (UDP) received.
func (c *Counter) Conns() int64 { return c.conns.Load() }

// ListenTCP starts a counting TCP listener on addr ("host:port", IPv4 or
// IPv6) that
// writes reply to each connection once it has read something, until the
// test ends.
func ListenTCP(t testing.TB, addr string, reply []byte) *Counter {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	c := &Counter{Addr: l.Addr().(*net.TCPAddr).AddrPort()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.conns.Add(1)
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				replied := false
				for {
					n, err := conn.Read(buf)
					c.bytes.Add(int64(n))
					if n > 0 && !replied && reply != nil {
						replied = true
						_, _ = conn.Write(reply)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return c
}

// ListenUDP starts a counting UDP listener on addr until the test ends.
func ListenUDP(t testing.TB, addr string) *Counter {
	t.Helper()
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(t.Context(), "udp4", addr)
	if err != nil {
		t.Fatalf("listen udp %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	c := &Counter{Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.conns.Add(1)
			c.bytes.Add(int64(n))
		}
	}()
	return c
}

// Counting wraps l so that c counts the connections it accepts and the
// bytes read from them (a server of the test's behind it).
func Counting(l net.Listener) (net.Listener, *Counter) {
	c := &Counter{Addr: l.Addr().(*net.TCPAddr).AddrPort()}
	return &countingListener{Listener: l, c: c}, c
}

type countingListener struct {
	net.Listener
	c *Counter
}

func (l *countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.c.conns.Add(1)
		conn = &countingConn{Conn: conn, c: l.c}
	}
	return conn, err
}

type countingConn struct {
	net.Conn
	c *Counter
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.c.bytes.Add(int64(n))
	return n, err
}

// Network creates a Docker network of the test's (removed at its end) and
// returns this machine's address on it: a place for the test's listeners
// that is not loopback and leads nowhere off this machine.
func Network(t testing.TB, cli *client.Client, prefix string) netip.Addr {
	t.Helper()
	name := prefix + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	created, err := cli.NetworkCreate(t.Context(), name, network.CreateOptions{Driver: "bridge"})
	if err != nil {
		t.Fatalf("create network %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cli.NetworkRemove(ctx, created.ID); err != nil {
			t.Errorf("remove network %s: %v", name, err)
		}
	})
	n, err := cli.NetworkInspect(t.Context(), created.ID, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.IPAM.Config {
		if gw, err := netip.ParseAddr(c.Gateway); err == nil && gw.Is4() {
			return gw
		}
	}
	t.Fatalf("network %s has no IPv4 gateway", name)
	return netip.Addr{}
}

// ListenICMP counts, until the test ends, the ICMP echo requests this
// machine receives (after its firewall) whose payload holds marker: a raw
// socket, so the test runs as root.
func ListenICMP(t testing.TB, marker string) *Counter {
	t.Helper()
	c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		t.Fatalf("listen icmp: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cnt := &Counter{}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || m.Type != ipv4.ICMPTypeEcho {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && strings.Contains(string(e.Data), marker) {
				cnt.conns.Add(1)
				cnt.bytes.Add(int64(n))
			}
		}
	}()
	return cnt
}

// Ping sends one ICMP echo request with payload to addr from this
// machine through a raw socket (a check that ListenICMP sees what
// arrives).
func Ping(t testing.TB, addr netip.Addr, payload string) {
	t.Helper()
	c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	defer c.Close()
	b, err := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 1, Seq: 1, Data: []byte(payload)}}).Marshal(nil)
	if err == nil {
		_, err = c.WriteTo(b, &net.IPAddr{IP: net.IP(addr.AsSlice())})
	}
	if err != nil {
		t.Fatalf("ping %v: %v", addr, err)
	}
}
