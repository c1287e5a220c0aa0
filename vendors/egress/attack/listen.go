package attack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/miekg/dns"

	"github.com/tangle-network/boxctl/vendors/egress/relay"
)

// Resolver is a DNS server of the suite's: A answers from its map, TXT
// answers "seen" for any name, and a count of every query it received.
type Resolver struct {
	// Addr is where it listens, UDP and TCP.
	Addr    netip.AddrPort
	names   map[string]netip.Addr
	queries atomic.Int64
	mu      sync.Mutex
	asked   map[string]int64
	close   func() error
}

// StartResolver serves names (lower case, no trailing dot) on host, UDP
// and TCP, on port (0 picks a free one) until Close.
func StartResolver(ctx context.Context, host string, port int, names map[string]netip.Addr) (*Resolver, error) {
	var (
		l   net.Listener
		pc  net.PacketConn
		err error
	)
	if port == 0 {
		l, pc, err = relay.ListenDNS(ctx, netip.MustParseAddr(host))
	} else {
		var lc net.ListenConfig
		l, err = lc.Listen(ctx, "tcp4", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			if pc, err = lc.ListenPacket(ctx, "udp4", l.Addr().String()); err != nil {
				_ = l.Close()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	r := &Resolver{Addr: l.Addr().(*net.TCPAddr).AddrPort(), names: names, asked: map[string]int64{}}
	udp, tcp := &dns.Server{PacketConn: pc, Handler: r}, &dns.Server{Listener: l, Handler: r}
	go func() { _ = udp.ActivateAndServe() }()
	go func() { _ = tcp.ActivateAndServe() }()
	r.close = func() error { return errors.Join(pc.Close(), l.Close()) }
	return r, nil
}

// Close stops the resolver.
func (r *Resolver) Close() error { return r.close() }

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

// Counter is a TCP or UDP listener of the suite's that counts the bytes
// it receives and, for TCP, answers each connection with a reply.
type Counter struct {
	// Addr is where it listens.
	Addr  netip.AddrPort
	bytes atomic.Int64
	conns atomic.Int64
	close func() error
}

// Bytes returns the bytes received so far.
func (c *Counter) Bytes() int64 { return c.bytes.Load() }

// Conns returns the connections (TCP) or datagrams (UDP) received.
func (c *Counter) Conns() int64 { return c.conns.Load() }

// Add counts n more bytes in one more arrival (for counters fed from
// elsewhere, such as an ICMP socket).
func (c *Counter) Add(n int64) {
	c.conns.Add(1)
	c.bytes.Add(n)
}

// Close stops the listener.
func (c *Counter) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// ListenTCP starts a counting TCP listener on addr ("host:port", IPv4 or
// IPv6) that writes reply to each connection once it has read something,
// until Close.
func ListenTCP(ctx context.Context, addr string, reply []byte) (*Counter, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &Counter{Addr: l.Addr().(*net.TCPAddr).AddrPort(), close: l.Close}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.conns.Add(1)
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(time.Minute))
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
	return c, nil
}

// ListenUDP starts a counting UDP listener on addr until Close.
func ListenUDP(ctx context.Context, addr string) (*Counter, error) {
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp4", addr)
	if err != nil {
		return nil, err
	}
	c := &Counter{Addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), close: pc.Close}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			c.Add(int64(n))
		}
	}()
	return c, nil
}

// Counting wraps l so that c counts the connections it accepts and the
// bytes read from them (a server of the suite's behind it).
func Counting(l net.Listener) (net.Listener, *Counter) {
	c := &Counter{Addr: l.Addr().(*net.TCPAddr).AddrPort(), close: l.Close}
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

// Network creates a Docker network of the suite's and returns this
// machine's address on it (a place for listeners that is not loopback and
// leads nowhere off this machine) and a function that removes it.
func Network(ctx context.Context, cli *client.Client, prefix string) (netip.Addr, func() error, error) {
	name := prefix + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	created, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge"})
	if err != nil {
		return netip.Addr{}, nil, fmt.Errorf("create network %s: %w", name, err)
	}
	remove := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cli.NetworkRemove(ctx, created.ID); err != nil {
			return fmt.Errorf("remove network %s: %w", name, err)
		}
		return nil
	}
	n, err := cli.NetworkInspect(ctx, created.ID, network.InspectOptions{})
	if err != nil {
		return netip.Addr{}, nil, errors.Join(err, remove())
	}
	for _, c := range n.IPAM.Config {
		if gw, err := netip.ParseAddr(c.Gateway); err == nil && gw.Is4() {
			return gw, remove, nil
		}
	}
	return netip.Addr{}, nil, errors.Join(fmt.Errorf("network %s has no IPv4 gateway", name), remove())
}
