// Package egresstest gives tests of egress enforcement a DNS resolver of
// their own, listeners that count what reaches them, and Docker networks
// of their own to listen on: package vendors/egress/attack's, each closed
// when the test ends, and an ICMP counter.
package egresstest

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/docker/docker/client"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/tangle-network/boxctl/vendors/egress/attack"
)

// Resolver is a DNS server of the test's (attack.Resolver).
type Resolver = attack.Resolver

// Counter is a counting listener of the test's (attack.Counter).
type Counter = attack.Counter

// StartResolver serves names (lower case, no trailing dot) on host (a
// free port, UDP and TCP; port 0 picks one) until the test ends.
func StartResolver(t testing.TB, host string, port int, names map[string]netip.Addr) *Resolver {
	t.Helper()
	r, err := attack.StartResolver(t.Context(), host, port, names)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// ListenTCP starts a counting TCP listener on addr ("host:port", IPv4 or
// IPv6) that writes reply to each connection once it has read something,
// until the test ends.
func ListenTCP(t testing.TB, addr string, reply []byte) *Counter {
	t.Helper()
	c, err := attack.ListenTCP(t.Context(), addr, reply)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ListenUDP starts a counting UDP listener on addr until the test ends.
func ListenUDP(t testing.TB, addr string) *Counter {
	t.Helper()
	c, err := attack.ListenUDP(t.Context(), addr)
	if err != nil {
		t.Fatalf("listen udp %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Counting wraps l so that c counts the connections it accepts and the
// bytes read from them (a server of the test's behind it).
func Counting(l net.Listener) (net.Listener, *Counter) { return attack.Counting(l) }

// Network creates a Docker network of the test's (removed at its end) and
// returns this machine's address on it: a place for the test's listeners
// that is not loopback and leads nowhere off this machine.
func Network(t testing.TB, cli *client.Client, prefix string) netip.Addr {
	t.Helper()
	gw, remove, err := attack.Network(t.Context(), cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remove(); err != nil {
			t.Error(err)
		}
	})
	return gw
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
				cnt.Add(int64(n))
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
