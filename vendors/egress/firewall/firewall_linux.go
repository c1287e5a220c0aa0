package firewall

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/tangle-network/boxctl/vendors/egress"
)

// Firewall holds the rules of one bridge. It is safe for concurrent use.
type Firewall struct {
	cfg   Config
	table *nftables.Table
	boxes *nftables.Chain
	mu    sync.Mutex
}

func table(bridge string) *nftables.Table {
	return &nftables.Table{Name: Table(bridge), Family: nftables.TableFamilyINet}
}

// Install installs (or reinstalls, replacing what was there) the rules of
// c.Bridge with no box allowed anything but the relay, the resolver and
// the broker.
func Install(c Config) (*Firewall, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	if pid, ok := owner(conn, c.Bridge); ok && pid != os.Getpid() && alive(pid) {
		return nil, &HeldError{Bridge: c.Bridge, PID: pid}
	}
	t := table(c.Bridge)
	// Delete any earlier table of the bridge within the same transaction,
	// so the bridge is never without its drop rules.
	conn.AddTable(t)
	conn.DelTable(t)
	conn.AddTable(t)
	f := &Firewall{cfg: c, table: t}
	f.build(conn)
	if err := conn.Flush(); err != nil {
		return nil, fmt.Errorf("firewall: install rules of %s: %w", c.Bridge, err)
	}
	return f, nil
}

// owner returns the pid that installed bridge's table, if there is one.
func owner(conn *nftables.Conn, bridge string) (int, bool) {
	t := table(bridge)
	rules, err := conn.GetRules(t, &nftables.Chain{Name: ChainOwner, Table: t})
	if err != nil || len(rules) == 0 {
		return 0, false
	}
	c, _ := userdata.GetString(rules[0].UserData, userdata.TypeComment)
	pid, err := strconv.Atoi(strings.TrimPrefix(c, "pid "))
	return pid, err == nil
}

// alive reports whether process pid runs: it exists, and has not exited
// (a zombie its parent has not reaped serves nothing).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // unreadable: assume it runs
	}
	// The state follows the command, which is in parentheses.
	if i := bytes.LastIndexByte(st, ')'); i >= 0 && i+2 < len(st) {
		return st[i+2] != 'Z' && st[i+2] != 'X'
	}
	return true
}

// Uninstall removes the table of bridge, if any.
func Uninstall(bridge string) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	if _, err := conn.ListTableOfFamily(Table(bridge), nftables.TableFamilyINet); err != nil {
		return nil // none
	}
	conn.DelTable(table(bridge))
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("firewall: remove rules of %s: %w", bridge, err)
	}
	return nil
}

// Installed reports whether bridge's table is in the kernel.
func Installed(bridge string) (bool, error) {
	conn, err := nftables.New()
	if err != nil {
		return false, fmt.Errorf("firewall: %w", err)
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("firewall: list chains: %w", err)
	}
	n := 0
	for _, c := range chains {
		if c.Table.Name == Table(bridge) && (c.Name == ChainInput || c.Name == ChainForward) {
			n++
		}
	}
	return n == 2, nil
}

func (f *Firewall) build(conn *nftables.Conn) {
	t, c := f.table, f.cfg
	// Base chains accept by default: they see all of this machine's traffic,
	// and every rule of theirs matches the bridge first.
	accept := nftables.ChainPolicyAccept
	pre := conn.AddChain(&nftables.Chain{Name: ChainPrerouting, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATDest - 1), Policy: &accept})
	in := conn.AddChain(&nftables.Chain{Name: ChainInput, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityFilter - 1), Policy: &accept})
	fwd := conn.AddChain(&nftables.Chain{Name: ChainForward, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityFilter - 1), Policy: &accept})
	f.boxes = conn.AddChain(&nftables.Chain{Name: ChainBoxes, Table: t})
	own := conn.AddChain(&nftables.Chain{Name: ChainOwner, Table: t})
	conn.AddRule(&nftables.Rule{Table: t, Chain: own, Exprs: []expr.Any{&expr.Counter{}},
		UserData: userdata.AppendString(nil, userdata.TypeComment, "pid "+strconv.Itoa(os.Getpid()))})

	br := iif(c.Bridge)
	add := func(ch *nftables.Chain, comment string, e ...expr.Any) {
		conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: e, UserData: userdata.AppendString(nil, userdata.TypeComment, comment)})
	}
	for _, r := range []struct {
		proto    byte
		from, to uint16
		what     string
	}{{unix.IPPROTO_TCP, 80, c.HTTPPort, "http to relay"}, {unix.IPPROTO_TCP, 443, c.TLSPort, "tls to relay"},
		{unix.IPPROTO_UDP, 53, c.DNSPort, "dns to resolver"}, {unix.IPPROTO_TCP, 53, c.DNSPort, "dns/tcp to resolver"}} {
		add(pre, r.what, cat(br, ipv4(), daddr(netip.PrefixFrom(c.Gateway, 32)), l4(r.proto), dport(r.from),
			&expr.Immediate{Register: 1, Data: be16(r.to)}, &expr.Redir{RegisterProtoMin: 1})...)
	}

	add(in, "ipv6 dropped", cat(br, nfproto(unix.NFPROTO_IPV6), verdict(expr.VerdictDrop))...)
	add(in, "replies accepted", cat(br, reply(), verdict(expr.VerdictAccept))...)
	for _, p := range []struct {
		port uint16
		what string
	}{{c.HTTPPort, "relay http"}, {c.TLSPort, "relay tls"}, {c.DNSPort, "resolver tcp"}} {
		add(in, p.what, cat(br, ipv4(), daddr(netip.PrefixFrom(c.Gateway, 32)), l4(unix.IPPROTO_TCP), dport(p.port), verdict(expr.VerdictAccept))...)
	}
	add(in, "resolver udp", cat(br, ipv4(), daddr(netip.PrefixFrom(c.Gateway, 32)), l4(unix.IPPROTO_UDP), dport(c.DNSPort), verdict(expr.VerdictAccept))...)
	if c.Broker.IsValid() {
		add(in, "broker", cat(br, ipv4(), daddr(netip.PrefixFrom(c.Broker.Addr(), 32)), l4(unix.IPPROTO_TCP), dport(c.Broker.Port()), verdict(expr.VerdictAccept))...)
	}
	add(in, "host gateway dropped", cat(br, ipv4(), daddr(netip.PrefixFrom(c.Gateway, 32)), verdict(expr.VerdictDrop))...)
	add(in, "link-local dropped", cat(br, ipv4(), daddr(LinkLocal), verdict(expr.VerdictDrop))...)
	add(in, "per box", cat(br, &expr.Verdict{Kind: expr.VerdictJump, Chain: ChainBoxes})...)
	add(in, "host dropped", cat(br, verdict(expr.VerdictDrop))...)

	add(fwd, "ipv6 dropped", cat(br, nfproto(unix.NFPROTO_IPV6), verdict(expr.VerdictDrop))...)
	add(fwd, "replies accepted", cat(br, reply(), verdict(expr.VerdictAccept))...)
	add(fwd, "link-local dropped", cat(br, ipv4(), daddr(LinkLocal), verdict(expr.VerdictDrop))...)
	add(fwd, "other boxes dropped", cat(br, oif(c.Bridge), verdict(expr.VerdictDrop))...)
	add(fwd, "per box", cat(br, &expr.Verdict{Kind: expr.VerdictJump, Chain: ChainBoxes})...)
	add(fwd, "rest dropped", cat(br, verdict(expr.VerdictDrop))...)
	add(fwd, "inbound dropped", cat(oif(c.Bridge), original(), verdict(expr.VerdictDrop))...)
}

// SetBox replaces the rules of the box at addr with those of p's address
// rules (TCP only), in one transaction. An Open policy is refused: a box
// that may reach anything does not belong on a confined bridge.
func (f *Firewall) SetBox(addr netip.Addr, p egress.Policy) error {
	if !addr.Is4() {
		return fmt.Errorf("firewall: box address %v: want IPv4", addr)
	}
	if p.Open {
		return fmt.Errorf("firewall: box %v: an open policy has no place on a confined network", addr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	if err := f.delBox(conn, addr); err != nil {
		return err
	}
	src := cat(ipv4(), saddr(addr))
	for _, r := range p.Prefixes() {
		e := cat(src, daddr(r.Prefix), l4(unix.IPPROTO_TCP))
		if r.Port != 0 {
			e = append(e, dport(r.Port)...)
		}
		e = append(e, verdict(expr.VerdictAccept)...)
		conn.AddRule(&nftables.Rule{Table: f.table, Chain: f.boxes, Exprs: e,
			UserData: userdata.AppendString(nil, userdata.TypeComment, boxComment(addr)+" "+r.String())})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("firewall: rules of box %v: %w", addr, err)
	}
	return nil
}

// RemoveBox removes the rules of the box at addr.
func (f *Firewall) RemoveBox(addr netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	if err := f.delBox(conn, addr); err != nil {
		return err
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("firewall: remove rules of box %v: %w", addr, err)
	}
	return nil
}

func (f *Firewall) delBox(conn *nftables.Conn, addr netip.Addr) error {
	rules, err := conn.GetRules(f.table, f.boxes)
	if err != nil {
		return fmt.Errorf("firewall: list rules: %w", err)
	}
	for _, r := range rules {
		if c, _ := userdata.GetString(r.UserData, userdata.TypeComment); strings.HasPrefix(c, boxComment(addr)+" ") {
			if err := conn.DelRule(r); err != nil {
				return fmt.Errorf("firewall: %w", err)
			}
		}
	}
	return nil
}

func boxComment(addr netip.Addr) string { return "box " + addr.String() }

// Uninstall removes the bridge's table.
func (f *Firewall) Uninstall() error { return Uninstall(f.cfg.Bridge) }

// Rules reads back the rules of bridge's table, in order, chain by chain.
func Rules(bridge string) ([]Rule, error) {
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	t := table(bridge)
	var out []Rule
	for _, ch := range []string{ChainPrerouting, ChainInput, ChainForward, ChainBoxes} {
		rules, err := conn.GetRules(t, &nftables.Chain{Name: ch, Table: t})
		if err != nil {
			return nil, fmt.Errorf("firewall: read rules of %s: %w", ch, err)
		}
		for _, r := range rules {
			out = append(out, decode(ch, r))
		}
	}
	return out, nil
}

func decode(chain string, r *nftables.Rule) Rule {
	out := Rule{Chain: chain}
	out.Comment, _ = userdata.GetString(r.UserData, userdata.TypeComment)
	var dst bool
	var mask []byte
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Payload:
			dst = e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 16 && e.Len == 4
		case *expr.Bitwise:
			if dst {
				mask = e.Mask
			}
		case *expr.Cmp:
			if dst && len(e.Data) == 4 {
				bits := 32
				if mask != nil {
					bits = 0
					for _, b := range mask {
						bits += popcount(b)
					}
				}
				out.Dst = netip.PrefixFrom(netip.AddrFrom4([4]byte(e.Data)), bits)
			}
			dst, mask = false, nil
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictAccept:
				out.Verdict = "accept"
			case expr.VerdictDrop:
				out.Verdict = "drop"
			case expr.VerdictJump:
				out.Verdict = "jump"
			}
		}
	}
	return out
}

func popcount(b byte) int {
	n := 0
	for ; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// Expression builders. Register 1 is the only one used.

func cat(parts ...any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		switch p := p.(type) {
		case []expr.Any:
			out = append(out, p...)
		case expr.Any:
			out = append(out, p)
		}
	}
	return out
}

func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func iif(n string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n)}}
}

func oif(n string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n)}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func ipv4() []expr.Any { return nfproto(unix.NFPROTO_IPV4) }

func l4(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func addr4(offset uint32, p netip.Prefix) []expr.Any {
	a := p.Masked().Addr().As4()
	e := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}}
	if p.Bits() < 32 {
		mask := binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-p.Bits()))
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)})
	}
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
}

func saddr(a netip.Addr) []expr.Any   { return addr4(12, netip.PrefixFrom(a, 32)) }
func daddr(p netip.Prefix) []expr.Any { return addr4(16, p) }

func dport(p uint16) []expr.Any {
	return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(p)}}
}

func be16(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }

// ctDirReply is IP_CT_DIR_REPLY.
const ctDirReply = 1

func ctDir(d byte) []expr.Any {
	return []expr.Any{&expr.Ct{Key: expr.CtKeyDIRECTION, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{d}}}
}

func reply() []expr.Any    { return ctDir(ctDirReply) }
func original() []expr.Any { return ctDir(0) }

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }
