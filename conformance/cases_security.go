package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/attack"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
)

// liveChanges is how many allow-then-deny changes security.egress-change
// makes.
const liveChanges = 10

func securityCases() []Case {
	return []Case{
		{ID: "security.egress", run: egressCase, Timeout: 8 * time.Minute,
			Description: "a box under default-deny with one allowed host reaches it, and no byte reaches any other listener of the suite: other names, forged SNI, Host and --resolve, raw addresses, this machine, another box, DNS to any resolver, UDP, QUIC, IPv6, proxy variables; link-local is dropped by the rules that hold"},
		{ID: "security.egress-change", run: egressChangeCase,
			Description: fmt.Sprintf("a running box's policy changes at once: allowed, the box reaches the host; denied, it is refused as soon as the change returns, which takes at most 1 s at p99 over %d changes", liveChanges)},
	}
}

// security returns the target's security rig and what its vendor's rules
// can say, or why the security cases do not apply.
func (c *caseCtx) security() (*Security, vendors.EgressRules, error) {
	s, v := c.r.t.Security, c.r.t.Vendor
	switch {
	case s == nil:
		return nil, vendors.EgressRules{}, skip("security", "no Target.Security: the suite's listeners run on this machine (StartSecurity)")
	case !v.Supports()[vendors.FieldEgress]:
		return nil, vendors.EgressRules{}, skip("egress", "vendor "+v.Name()+" enforces no egress policy")
	case c.h.Name() != c.r.harnesses[0].Name():
		return nil, vendors.EgressRules{}, skip("security", "the attacks do not depend on the harness: they run with "+c.r.harnesses[0].Name())
	}
	e, own := v.(vendors.EgressEnforcer)
	relayed := own && e.EgressRules().Relay
	if own && !relayed && !c.r.t.Emulated {
		return nil, vendors.EgressRules{}, skip("security", "the boxes of "+v.Name()+"'s own cloud do not reach the suite's listeners on this machine")
	}
	if (!own || relayed) && s.Gate == nil {
		return nil, vendors.EgressRules{}, skip("egress", "no Security.Gate confines the boxes of "+v.Name())
	}
	return s, s.rules(v), nil
}

// confined returns a provider of boxes under policy.
func (c *caseCtx) confined(s *Security, policy string) (*sandbox.Provider, error) {
	p, err := egress.Parse(policy)
	if err != nil {
		return nil, failErr(c.step("egress.Parse(%q)", policy), "a policy", err)
	}
	return c.sandbox(func(o *sandbox.Options) {
		o.Egress = &p
		if s.Gate != nil {
			o.EgressGate = s.Gate
		}
	})
}

// boxExec runs an attempt as the box's user.
func boxExec(box vendors.Box) attack.Exec {
	return func(ctx context.Context, at attack.Attempt) (string, error) {
		res, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", at.Script + " 2>&1; true"}, Env: at.Env})
		if err != nil {
			return "", err
		}
		return string(res.Stdout), nil
	}
}

func egressCase(c *caseCtx) error {
	s, rules, err := c.security()
	if err != nil {
		return err
	}
	plan := attack.Plan{Ports: rules.Ports, Names: rules.Domains}
	policy := s.rig.Policy(plan)
	p, err := c.confined(s, policy)
	if err != nil {
		return err
	}
	a, err := c.create(p, c.createRequest())
	if err != nil {
		return err
	}
	b, err := c.create(p, c.createRequest())
	if err != nil {
		return err
	}
	// The box still reaches the model, through the broker.
	req := c.step("a turn under egress %q", policy)
	if _, text, err := c.stream(c.ctx, a, provider.Turn{Prompt: "Say hello."}); err != nil || text == "" {
		return failf(req, "the turn answered through the broker", "%q, %v", text, err)
	}
	req = c.step("read the box's address and gateway")
	an, err := readBoxNet(c.ctx, a.Box())
	if err != nil {
		return failErr(req, "its address and gateway", err)
	}
	bn, err := readBoxNet(c.ctx, b.Box())
	if err != nil {
		return failErr(req, "the other box's address", err)
	}
	plan.Gateway, plan.OtherBox = an.Gateway, bn.Addr
	if s.Relay.IsValid() {
		plan.Relay, plan.Resolver = s.Relay, s.Relay.String()
	}
	if plan.HostTCP, plan.HostUDP, err = s.rig.ListenHost(c.ctx, an.Gateway); err != nil {
		return failErr(c.step("listen on %v, this machine on the box's network", an.Gateway), "listeners", err)
	}
	if u, err := url.Parse(c.r.t.BrokerURL); err == nil && c.r.t.BrokerURL != "" {
		if ba, err := netip.ParseAddr(u.Hostname()); err == nil {
			if plan.BrokerOther, _, err = s.rig.ListenHost(c.ctx, ba); err != nil {
				c.note("no attempt at the broker's address: %v", err)
			}
		}
	}
	bridge, ll, here := hostInterface(an.Gateway)
	if here && ll != "" {
		if v6, err := attack.ListenTCP(c.ctx, "["+ll+"%"+bridge+"]:0", []byte("v6")); err == nil {
			c.track(func(context.Context) error { return v6.Close() })
			plan.V6, plan.V6Counter = ll, v6
		} else {
			c.note("no IPv6 attempt: listen on %s%%%s: %v", ll, bridge, err)
		}
	}
	// The other box counts what reaches its port 9000.
	if _, err := b.Box().Spawn(c.ctx, vendors.SpawnSpec{Name: "sink", Command: []string{"node", "-e",
		`require("net").createServer(s=>s.on("data",d=>require("fs").appendFileSync("/tmp/sink",d))).listen(9000)`}}); err != nil {
		return failErr(c.step("a listener in the other box"), "it started", err)
	}
	plan.OtherSink = func() int64 {
		res, err := b.Box().Exec(c.ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "stat -c %s /tmp/sink 2>/dev/null || echo 0"}})
		if err != nil {
			return -1 // the judge sees a change
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(string(res.Stdout)), 10, 64)
		return n
	}
	if err := c.waitSink(b.Box()); err != nil {
		return err
	}
	allowedBefore := s.rig.AllowedTLS.Bytes() + s.rig.AllowedHTTP.Bytes() + s.rig.AllowedTCP.Bytes()
	attempts := s.rig.Attempts(plan)
	req = c.step("%d attempts out of the box as its user, under %q", len(attempts), policy)
	rows, err := attack.Run(c.ctx, attempts, boxExec(a.Box()), 4, "box user")
	if err != nil {
		return failErr(req, "every attempt run", err)
	}
	var bad []string
	blocked := 0
	for _, w := range rows {
		if !w.OK() {
			bad = append(bad, fmt.Sprintf("%s: blocked %v (want %v), %d bytes leaked, output %q", w.Name, w.Blocked, w.Want, w.Leaked, clip(w.Out, 120)))
		}
		if w.Blocked {
			blocked++
		}
	}
	leaked := s.rig.Leaked(plan)
	c.note("security.egress on %s, policy %q: %d attempts, %d blocked, %d leaked bytes in all", c.r.t.Vendor.Name(), policy, len(rows), blocked, leaked)
	c.note("%s", attack.Table(rows))
	if len(bad) > 0 {
		return failf(req, "the allowed host reached and every other attempt blocked, with no byte leaked", "%s", strings.Join(bad, "; "))
	}
	if leaked != 0 {
		return failf(req, "no byte at any listener but the allowed host", "%d bytes or queries in all", leaked)
	}
	if s.rig.AllowedTLS.Bytes()+s.rig.AllowedHTTP.Bytes()+s.rig.AllowedTCP.Bytes() == allowedBefore {
		return failf(req, "the allowed host reached", "it saw nothing")
	}
	// Link-local and the metadata address: read back, never probed.
	if eb, ok := a.Box().(vendors.EgressBlocks); ok {
		return linkLocalBlocks(c, eb)
	}
	if !here {
		c.note("link-local: the box's network is not on this machine; its rules were not read back")
		return nil
	}
	req = c.step("read back the rules of %s", bridge)
	fw, err := firewall.Rules(bridge)
	if err != nil {
		return failErr(req, "the installed rules", err)
	}
	for _, chain := range []string{firewall.ChainInput, firewall.ChainForward} {
		ll := slices.IndexFunc(fw, func(x firewall.Rule) bool {
			return x.Chain == chain && x.Verdict == "drop" && x.Dst == firewall.LinkLocal
		})
		jump := slices.IndexFunc(fw, func(x firewall.Rule) bool { return x.Chain == chain && x.Verdict == "jump" })
		if ll < 0 || jump < ll || !fw[ll].Dst.Contains(netip.MustParseAddr("169.254.169.254")) {
			return failf(req, "a drop of "+firewall.LinkLocal.String()+" ahead of the per-box rules in "+chain, "%d rules, none such", len(fw))
		}
	}
	return nil
}

// linkLocalBlocks reads back the address blocks a box's vendor lets it
// reach (a NetworkPolicy): none may reach link-local.
func linkLocalBlocks(c *caseCtx, eb vendors.EgressBlocks) error {
	req := c.step("read back the address blocks the box may reach")
	blocks, err := eb.EgressBlocks(c.ctx)
	if err != nil {
		return failErr(req, "the box's rules", err)
	}
	meta := netip.MustParseAddr("169.254.169.254")
	for _, b := range blocks {
		c.note("the box may reach %v except %v on %v", b.Prefix, b.Except, b.Ports)
		excepted := slices.ContainsFunc(b.Except, func(e netip.Prefix) bool {
			return e.Bits() <= firewall.LinkLocal.Bits() && e.Contains(firewall.LinkLocal.Addr())
		})
		if b.Reaches(meta) || (b.Prefix.Overlaps(firewall.LinkLocal) && !excepted) {
			return failf(req, "no block that reaches "+firewall.LinkLocal.String(), "%v except %v", b.Prefix, b.Except)
		}
	}
	if len(blocks) == 0 {
		return failf(req, "the box's blocks (its relay's at least)", "none")
	}
	return nil
}

// waitSink waits for the other box's listener.
func (c *caseCtx) waitSink(box vendors.Box) error {
	req := c.step("wait for the other box's listener on 9000")
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := box.Exec(c.ctx, vendors.ExecSpec{Command: []string{"node", "-e",
			`require("net").connect(9000,"127.0.0.1").on("connect",()=>{console.log("up");process.exit(0)}).on("error",()=>process.exit(0))`}})
		if err == nil && strings.TrimSpace(string(res.Stdout)) == "up" {
			return nil
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			return failf(req, "the listener up", "not up after 30s (%v)", err)
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func egressChangeCase(c *caseCtx) error {
	s, rules, err := c.security()
	if err != nil {
		return err
	}
	p, err := c.confined(s, "")
	if err != nil {
		return err
	}
	a, err := c.create(p, c.createRequest())
	if err != nil {
		return err
	}
	// The host by name where the rules say names (the relay and the
	// resolver then refuse at once), else by address.
	allowRule := s.rig.Allowed.String()
	reach := attack.Attempt{Script: attack.NodeTCP, Env: map[string]string{"H": s.rig.Allowed.String(), "P": strconv.Itoa(attack.AllowedPort)}}
	reached := func(out string) bool { return strings.HasPrefix(strings.TrimSpace(out), "data") }
	if rules.Domains {
		allowRule = attack.AllowedName
		reach = attack.Attempt{Script: "curl -sk --max-time " + attack.ProbeTimeout + " https://" + attack.AllowedName + "/"}
		reached = func(out string) bool { return strings.TrimSpace(out) == attack.AllowedBody }
	}
	allow, err := egress.Parse(allowRule)
	if err != nil {
		return failErr(c.step("egress.Parse(%q)", allowRule), "a policy", err)
	}
	exec := boxExec(a.Box())
	var took []time.Duration
	for i := range liveChanges {
		req := c.step("change %d: SetEgress(%s), then reach the host", i, allowRule)
		if err := a.SetEgress(c.ctx, allow); err != nil {
			var u *vendors.UnsupportedError
			if i == 0 && errors.As(err, &u) {
				return skip("egress.change", "vendor "+c.r.t.Vendor.Name()+" fixes a box's rules at its create")
			}
			return failErr(req, "the change made", err)
		}
		if out, err := exec(c.ctx, reach); err != nil || !reached(out) {
			return failf(req, "the allowed host reached", "%q, %v", clip(out, 200), err)
		}
		req = c.step("change %d: SetEgress(deny), then the host refused", i)
		start := time.Now()
		if err := a.SetEgress(c.ctx, egress.Policy{}); err != nil {
			return failErr(req, "the change made", err)
		}
		took = append(took, time.Since(start))
		if out, err := exec(c.ctx, reach); err != nil || reached(out) {
			return failf(req, "the host refused once SetEgress returned", "%q, %v", clip(out, 200), err)
		}
	}
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]
	c.note("security.egress-change on %s: %d changes, SetEgress(deny) p50 %v, p99 %v", c.r.t.Vendor.Name(), liveChanges, p50.Round(time.Microsecond), p99.Round(time.Microsecond))
	if p99 > time.Second {
		return failf(c.step("SetEgress(deny) over %d changes", liveChanges), "p99 within 1s", "%v", p99)
	}
	return nil
}
