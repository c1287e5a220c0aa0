// Package attack is the egress attack suite: listeners of this
// machine on Docker networks of the suite's own (an allowed host, and
// decoys that count every byte that reaches them), a DNS resolver that
// knows their names, and the attempts a box under default-deny makes to
// get out, each judged by what reached the listeners, never by what the
// box says. Every target is on this machine: if a policy failed, nothing
// would leave it.
package attack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"
)

// The names the suite's resolvers know, and what the allowed host says.
const (
	AllowedName = "allowed.test"
	OtherName   = "other.test"
	AllowedBody = "allowed-host-ok"
	// AllowedPort is the allowed host's port for address rules.
	AllowedPort = 8443
)

// ProbeTimeout bounds each attempt in the box, in seconds: a dropped
// packet is never answered.
const ProbeTimeout = "3"

// NodeTCP sends "probe" over TCP to $H:$P and prints what came back, or
// the error.
const NodeTCP = `node -e 'const s=require("net").connect({host:process.env.H,port:+process.env.P},()=>s.write("probe"));
s.setTimeout(3000,()=>{console.log("timeout");s.destroy()});s.on("data",d=>{console.log("data",d.length);s.destroy()});
s.on("error",e=>console.log("error",e.code))'`

// nodeUDP sends a datagram ("probe", or a QUIC-looking initial) to $H:$P.
const nodeUDP = `node -e 'const s=require("dgram").createSocket(process.env.H.includes(":")?"udp6":"udp4");
const b=process.env.QUIC?Buffer.concat([Buffer.from([0xc0,0,0,0,1]),Buffer.alloc(1195)]):Buffer.from("probe");
s.send(b,+process.env.P,process.env.H,e=>{console.log(e?"error "+e.code:"sent");setTimeout(()=>s.close(),500)})'`

// nodeDNS asks $H:$P for $N of type $T (1 A, 16 TXT) over $NET (udp or
// tcp) and prints the answer's rcode and answer count.
const nodeDNS = `node -e 'const e=process.env;const b=[0x12,0x34,1,0,0,1,0,0,0,0,0,0];
for(const l of e.N.split(".")){b.push(l.length);for(const c of l)b.push(c.charCodeAt(0))}b.push(0,0,+e.T,0,1);
const done=(d,o)=>{console.log("rcode",d[o+3]&15,"answers",d[o+6]*256+d[o+7])};
if(e.NET==="udp"){const s=require("dgram").createSocket("udp4");s.on("message",d=>{done(d,0);s.close()});
s.send(Buffer.from(b),+e.P,e.H);setTimeout(()=>{console.log("timeout");s.close()},3000)}else{
const s=require("net").connect({host:e.H,port:+e.P},()=>s.write(Buffer.from([b.length>>8,b.length&255,...b])));
s.setTimeout(3000,()=>{console.log("timeout");s.destroy()});s.on("data",d=>{done(d,2);s.destroy()});s.on("error",x=>console.log("error",x.code))}'`

// Rig is every listener and resolver of the suite.
type Rig struct {
	// Allowed is the allowed host's address, Decoy where everything else
	// listens: this machine on two Docker networks of the rig's.
	Allowed, Decoy netip.Addr
	// Resolver is what an egress gate resolves names with (on loopback);
	// Direct, on Decoy:53, is one a box might query itself.
	Resolver, Direct *Resolver
	// AllowedTLS, AllowedHTTP and AllowedTCP count what reaches the
	// allowed host on 443, 80 and AllowedPort.
	AllowedTLS, AllowedHTTP, AllowedTCP *Counter
	// The listeners that must see nothing.
	allowedOther, allowedUDP, allowedQUIC, decoyUDP *Counter
	decoys                                          map[int]*Counter

	mu      sync.Mutex
	closers []func() error
}

// Start makes the rig's networks on the engine of cli and starts its
// listeners and resolvers. Close it.
func Start(ctx context.Context, cli *client.Client) (_ *Rig, err error) {
	r := &Rig{decoys: map[int]*Counter{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.Close())
		}
	}()
	for _, n := range []struct {
		prefix string
		addr   *netip.Addr
	}{{"bxt-allowed-", &r.Allowed}, {"bxt-decoy-", &r.Decoy}} {
		a, remove, err := Network(ctx, cli, n.prefix)
		if err != nil {
			return nil, err
		}
		*n.addr = a
		r.add(remove)
	}
	names := map[string]netip.Addr{AllowedName: r.Allowed, OtherName: r.Decoy}
	if r.Resolver, err = StartResolver(ctx, "127.0.0.1", 0, names); err != nil {
		return nil, err
	}
	r.add(r.Resolver.Close)
	if r.Direct, err = StartResolver(ctx, r.Decoy.String(), 53, names); err != nil {
		return nil, err
	}
	r.add(r.Direct.Close)
	if r.AllowedTLS, err = r.serveAllowed(443, true); err != nil {
		return nil, err
	}
	if r.AllowedHTTP, err = r.serveAllowed(80, false); err != nil {
		return nil, err
	}
	tcp := func(a netip.Addr, port int, reply string) (*Counter, error) {
		c, err := ListenTCP(ctx, netip.AddrPortFrom(a, uint16(port)).String(), []byte(reply))
		if err == nil {
			r.add(c.Close)
		}
		return c, err
	}
	udp := func(a netip.Addr, port int) (*Counter, error) {
		c, err := ListenUDP(ctx, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			r.add(c.Close)
		}
		return c, err
	}
	var errs []error
	keep := func(c *Counter, err error) *Counter { errs = append(errs, err); return c }
	r.AllowedTCP = keep(tcp(r.Allowed, AllowedPort, "ip-rule"))
	r.allowedOther = keep(tcp(r.Allowed, 9999, "x"))
	r.allowedUDP = keep(udp(r.Allowed, AllowedPort))
	r.allowedQUIC = keep(udp(r.Allowed, 443))
	r.decoyUDP = keep(udp(r.Decoy, 5353))
	for _, port := range []int{80, 443, 5432, 3128} {
		r.decoys[port] = keep(tcp(r.Decoy, port, "decoy"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Rig) add(close func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closers = append(r.closers, close)
}

// Close stops every listener and removes the rig's networks.
func (r *Rig) Close() error {
	r.mu.Lock()
	cs := r.closers
	r.closers = nil
	r.mu.Unlock()
	var errs []error
	for _, c := range slices.Backward(cs) {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// serveAllowed serves the allowed host on port (TLS with a certificate of
// its own, or plain HTTP), counting what reaches it.
func (r *Rig) serveAllowed(port int, tls bool) (*Counter, error) {
	l, err := net.Listen("tcp4", netip.AddrPortFrom(r.Allowed, uint16(port)).String())
	if err != nil {
		return nil, err
	}
	cl, c := Counting(l)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, AllowedBody)
	}))
	s.Listener = cl
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	r.add(func() error { s.Close(); return nil })
	return c, nil
}

// ListenHost starts the listeners on gw, this machine's address on a
// box's network, that the box must not reach (TCP and UDP, free ports).
func (r *Rig) ListenHost(ctx context.Context, gw netip.Addr) (tcp, udp *Counter, err error) {
	if tcp, err = ListenTCP(ctx, netip.AddrPortFrom(gw, 0).String(), []byte("host")); err != nil {
		return nil, nil, err
	}
	r.add(tcp.Close)
	if udp, err = ListenUDP(ctx, netip.AddrPortFrom(gw, 0).String()); err != nil {
		return nil, nil, err
	}
	r.add(udp.Close)
	return tcp, udp, nil
}

// Plan is what a run of the suite knows of the box it attacks from and of
// its vendor.
type Plan struct {
	// Ports and Names report what the vendor's rules can say: a port on
	// an address rule (else the allowed address is allowed on every
	// port), and a domain (else the allowed host is allowed by address).
	Ports, Names bool
	// Gateway is this machine on the box's network, where its relay and
	// resolver answer (unless Relay says otherwise); HostTCP and HostUDP
	// listen there (ListenHost).
	Gateway          netip.Addr
	HostTCP, HostUDP *Counter
	// Relay, when valid, is where the box's relay and resolver answer, if
	// not on Gateway (Kubernetes: an address of the relay's own).
	Relay netip.Addr
	// Resolver is the box's resolver as its resolv.conf names it.
	// Default: Docker's embedded one, 127.0.0.11.
	Resolver string
	// OtherBox, when valid, is another box of the vendor that counts what
	// reaches its port 9000 (OtherSink).
	OtherBox  netip.Addr
	OtherSink func() int64
	// V6, when set, is an IPv6 link-local address of this machine on the
	// box's network, and V6Counter its listener.
	V6        string
	V6Counter *Counter
	// BrokerOther, when set, listens on the broker's address (always
	// reachable), on another port than the broker's. Where the vendor's
	// rules say ports it must see nothing; where they name none the
	// broker's address is allowed whole, and the box reaches it: the
	// suite shows it.
	BrokerOther *Counter
}

// Policy returns the policy the suite's box runs under: default-deny, the
// allowed host by name (where the vendor's rules can say it) and by
// address (on AllowedPort where they can say a port).
func (r *Rig) Policy(p Plan) string {
	ip := netip.AddrPortFrom(r.Allowed, AllowedPort).String()
	if !p.Ports {
		ip = r.Allowed.String()
	}
	if !p.Names {
		return ip
	}
	return AllowedName + "," + ip
}

// Attempt is one way out a box tries.
type Attempt struct {
	Name   string
	Script string
	Env    map[string]string
	// Leaked returns the bytes (or queries) that reached the listeners
	// that must see none; nil for an attempt that must succeed.
	Leaked func() int64
	// Reach, for an attempt that must succeed, checks its output.
	Reach func(out string) bool
	// Root runs the attempt as uid 0 in the box.
	Root bool
	// Alone runs the attempt after all others, by itself (it changes the
	// box for what would run beside it).
	Alone bool
}

// sum adds counters.
func sum(cs ...*Counter) func() int64 {
	return func() int64 {
		var n int64
		for _, c := range cs {
			if c != nil {
				n += c.Bytes()
			}
		}
		return n
	}
}

// Queries counts the queries for a name the box may not reach that
// reached a resolver of the suite's: the gate's or the direct one.
func (r *Rig) Queries() int64 { return r.Resolver.Asked(OtherName) + r.Direct.Queries() }

// Attempts returns every attempt of the suite for p, as the box's user.
func (r *Rig) Attempts(p Plan) []Attempt {
	curl := "curl -sk --max-time " + ProbeTimeout + " "
	tcp := func(h netip.Addr, port int) map[string]string {
		return map[string]string{"H": h.String(), "P": strconv.Itoa(port)}
	}
	dnsEnv := func(h string, port int, name string, typ int, netw string) map[string]string {
		return map[string]string{"H": h, "P": strconv.Itoa(port), "N": name, "T": strconv.Itoa(typ), "NET": netw}
	}
	gw, d := p.Gateway.String(), r.Decoy.String()
	relay, boxDNS := gw, "127.0.0.11"
	if p.Relay.IsValid() {
		relay = p.Relay.String()
	}
	if p.Resolver != "" {
		boxDNS = p.Resolver
	}
	decoy := r.decoys
	var out []Attempt
	if p.Names {
		out = append(out,
			Attempt{Name: "allowed name, https", Script: curl + "https://" + AllowedName + "/", Reach: func(o string) bool { return o == AllowedBody }},
			Attempt{Name: "allowed name, http", Script: curl + "http://" + AllowedName + "/", Reach: func(o string) bool { return o == AllowedBody }})
	} else {
		out = append(out, Attempt{Name: "allowed host by name (no name rule)", Script: curl + "https://" + AllowedName + "/",
			Leaked: func() int64 { return r.Resolver.Asked(AllowedName) + r.AllowedTLS.Bytes() }})
	}
	queries := r.Queries
	out = append(out, []Attempt{
		{Name: "allowed address and port (TCP)", Script: NodeTCP, Env: tcp(r.Allowed, AllowedPort), Reach: func(o string) bool { return strings.HasPrefix(o, "data") }},
		{Name: "non-allowed name (https)", Script: curl + "https://" + OtherName + "/", Leaked: sum(decoy[443])},
		{Name: "non-allowed name at the relay (SNI other.test)", Script: curl + "--resolve " + OtherName + ":443:" + relay + " https://" + OtherName + "/", Leaked: sum(decoy[443])},
		{Name: "non-allowed name at the relay (Host other.test)", Script: curl + "-H 'Host: " + OtherName + "' http://" + relay + "/", Leaked: sum(decoy[80])},
		{Name: "raw IP (TCP 5432)", Script: NodeTCP, Env: tcp(r.Decoy, 5432), Leaked: sum(decoy[5432])},
		{Name: "raw IP (https)", Script: curl + "https://" + d + "/", Leaked: sum(decoy[443])},
		{Name: "Host: allowed name, sent to another address", Script: curl + "-H 'Host: " + AllowedName + "' http://" + d + "/", Leaked: sum(decoy[80])},
		{Name: "SNI allowed name, sent to another address (--connect-to)", Script: curl + "--connect-to " + AllowedName + ":443:" + d + ":443 https://" + AllowedName + "/", Leaked: sum(decoy[443])},
		{Name: "--resolve allowed name to another address", Script: curl + "--resolve " + AllowedName + ":443:" + d + " https://" + AllowedName + "/", Leaked: sum(decoy[443])},
		{Name: "SNI allowed name at the relay, meant for another address", Script: curl + "--resolve " + AllowedName + ":443:" + relay + " https://" + AllowedName + "/", Leaked: sum(decoy[443])},
		{Name: "host gateway, another port (TCP)", Script: NodeTCP, Env: tcp(p.Gateway, int(p.HostTCP.Addr.Port())), Leaked: sum(p.HostTCP)},
		{Name: "host gateway (UDP)", Script: nodeUDP, Env: tcp(p.Gateway, int(p.HostUDP.Addr.Port())), Leaked: sum(p.HostUDP)},
		{Name: "DNS A other.test, box resolver, UDP", Script: nodeDNS, Env: dnsEnv(boxDNS, 53, OtherName, 1, "udp"), Leaked: queries},
		{Name: "DNS TXT other.test, box resolver, UDP", Script: nodeDNS, Env: dnsEnv(boxDNS, 53, OtherName, 16, "udp"), Leaked: queries},
		{Name: "DNS A other.test, box resolver, TCP", Script: nodeDNS, Env: dnsEnv(boxDNS, 53, OtherName, 1, "tcp"), Leaked: queries},
		{Name: "DNS TXT other.test, box resolver, TCP", Script: nodeDNS, Env: dnsEnv(boxDNS, 53, OtherName, 16, "tcp"), Leaked: queries},
		{Name: "DNS TXT other.test, the relay's resolver, UDP", Script: nodeDNS, Env: dnsEnv(relay, 53, OtherName, 16, "udp"), Leaked: queries},
		{Name: "DNS A other.test, the suite's resolver, UDP", Script: nodeDNS, Env: dnsEnv(d, 53, OtherName, 1, "udp"), Leaked: queries},
		{Name: "DNS TXT other.test, the suite's resolver, UDP", Script: nodeDNS, Env: dnsEnv(d, 53, OtherName, 16, "udp"), Leaked: queries},
		{Name: "DNS A other.test, the suite's resolver, TCP", Script: nodeDNS, Env: dnsEnv(d, 53, OtherName, 1, "tcp"), Leaked: queries},
		{Name: "DNS TXT other.test, the suite's resolver, TCP", Script: nodeDNS, Env: dnsEnv(d, 53, OtherName, 16, "tcp"), Leaked: queries},
		{Name: "DNS TXT allowed.test, the suite's resolver, UDP", Script: nodeDNS, Env: dnsEnv(d, 53, AllowedName, 16, "udp"), Leaked: queries},
		{Name: "UDP to the allowed address and port", Script: nodeUDP, Env: tcp(r.Allowed, AllowedPort), Leaked: sum(r.allowedUDP)},
		{Name: "QUIC (UDP 443) to the allowed host", Script: nodeUDP, Env: map[string]string{"H": r.Allowed.String(), "P": "443", "QUIC": "1"}, Leaked: sum(r.allowedQUIC)},
		{Name: "UDP to another address", Script: nodeUDP, Env: tcp(r.Decoy, 5353), Leaked: sum(r.decoyUDP)},
		{Name: "HTTPS_PROXY set to another address", Script: curl + "https://" + OtherName + "/", Env: map[string]string{"HTTPS_PROXY": "http://" + d + ":3128", "HTTP_PROXY": "http://" + d + ":3128"}, Leaked: sum(decoy[3128], decoy[443])},
		{Name: "HTTPS_PROXY set, allowed name", Script: curl + "https://" + AllowedName + "/", Env: map[string]string{"HTTPS_PROXY": "http://" + d + ":3128"}, Leaked: sum(decoy[3128])},
		{Name: "proxy variables unset, raw IP", Script: "env -u HTTPS_PROXY -u HTTP_PROXY -u https_proxy -u http_proxy " + curl + "http://" + d + "/", Leaked: sum(decoy[80])},
	}...)
	if p.Ports {
		// Where rules carry no port, the allowed address is allowed on
		// every port: another port of it is reached by design.
		out = append(out, Attempt{Name: "host address on another network (allowed host, port 9999)", Script: NodeTCP, Env: tcp(r.Allowed, 9999), Leaked: sum(r.allowedOther)})
	}
	if p.OtherBox.IsValid() && p.OtherSink != nil {
		base := p.OtherSink()
		out = append(out, Attempt{Name: "another box (TCP 9000)", Script: NodeTCP, Env: tcp(p.OtherBox, 9000), Leaked: func() int64 { return p.OtherSink() - base }})
	}
	if c := p.BrokerOther; c != nil {
		at := Attempt{Name: "the broker's address, another port (TCP)", Script: NodeTCP, Env: tcp(c.Addr.Addr(), int(c.Addr.Port())), Leaked: sum(c)}
		if !p.Ports {
			at.Name, at.Leaked = "the broker's address, another port (TCP): reached, the vendor's rules name no port", nil
			at.Reach = func(o string) bool { return strings.HasPrefix(o, "data") }
		}
		out = append(out, at)
	}
	if p.V6 != "" && p.V6Counter != nil {
		out = append(out, Attempt{Name: "IPv6 to this machine (link-local of the bridge)",
			Script: curl + "-g 'http://[" + p.V6 + "%eth0]:" + strconv.Itoa(int(p.V6Counter.Addr.Port())) + "/'", Leaked: sum(p.V6Counter)})
	}
	return out
}

// Leaked returns every byte that reached a listener of the suite that
// must see none, and the queries for a name the box may not reach: the
// total over every attempt of p, which run concurrently.
func (r *Rig) Leaked(p Plan) int64 {
	n := sum(r.decoys[80], r.decoys[443], r.decoys[5432], r.decoys[3128], r.decoyUDP, r.allowedUDP, r.allowedQUIC,
		p.HostTCP, p.HostUDP, p.V6Counter)()
	if p.Ports {
		n += sum(r.allowedOther, p.BrokerOther)()
	}
	return n + r.Direct.Queries()
}

// Row is how one attempt ended.
type Row struct {
	Name string
	// Who is "uid N" or "root".
	Who string
	// Want is whether the attempt had to be blocked.
	Want, Blocked bool
	Leaked        int64
	Out           string
}

// OK reports whether the attempt ended as it had to.
func (w Row) OK() bool { return w.Blocked == w.Want && w.Leaked == 0 }

// Exec runs an attempt's script (with its environment) in the box and
// returns its output, stdout and stderr together.
type Exec func(ctx context.Context, at Attempt) (string, error)

// Run runs the attempts, parallel at a time (Alone ones last, by
// themselves), and judges each by its listeners; user names the box's
// user in the rows.
func Run(ctx context.Context, attempts []Attempt, exec Exec, parallel int, user string) ([]Row, error) {
	rows := make([]Row, len(attempts))
	run := func(i int, at Attempt) error {
		var before int64
		if at.Leaked != nil {
			before = at.Leaked()
		}
		out, err := exec(ctx, at)
		if err != nil {
			return fmt.Errorf("%s: %w", at.Name, err)
		}
		out = strings.TrimSpace(out)
		row := Row{Name: at.Name, Who: user, Want: at.Reach == nil, Out: out}
		if at.Root {
			row.Who = "root"
		}
		if at.Reach != nil {
			row.Blocked = !at.Reach(out)
		} else {
			row.Leaked = at.Leaked() - before
			// An answer is a leak too (another box's kernel answers
			// pings where nothing of the suite's counts them).
			row.Blocked = row.Leaked == 0 && !strings.Contains(out, "reply")
		}
		rows[i] = row
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, parallel))
	for i, at := range attempts {
		if !at.Alone {
			g.Go(func() error { return run(i, at) })
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := gctx.Err(); err != nil && ctx.Err() != nil {
		return nil, err
	}
	for i, at := range attempts {
		if at.Alone {
			if err := run(i, at); err != nil {
				return nil, err
			}
		}
	}
	return rows, nil
}

// Table renders rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| attempt | as | blocked | leaked bytes |\n| --- | --- | --- | --- |\n")
	for _, w := range rows {
		fmt.Fprintf(&b, "| %s | %s | %v | %d |\n", w.Name, w.Who, w.Blocked, w.Leaked)
	}
	return b.String()
}
