package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/gate"
)

// egressRelayer is a vendor whose confined boxes reach a relay of the
// caller's at an address of its own (Kubernetes).
type egressRelayer interface{ EgressRelay() netip.Addr }

// egressBridger is a vendor whose confined boxes share one bridge of this
// machine (Docker).
type egressBridger interface {
	EgressBridge(ctx context.Context) (string, netip.Addr, error)
}

// egressGate has the user's broker hold v's confined network (its kernel
// rules, relay and resolver live in the broker's process, beside the
// broker the boxes always reach at brokerURL) and returns a client of it.
func (a *app) egressGate(ctx context.Context, s *boxstate.Store, v vendors.Vendor, brokerURL string) (*gate.Client, error) {
	if r, ok := v.(egressRelayer); ok && r.EgressRelay().IsValid() {
		// A relay without a bridge, where the cluster's pods reach it:
		// their NetworkPolicies confine them.
		if _, err := a.ensureLocalBroker(ctx, s); err != nil {
			return nil, err
		}
		c := gate.Dial(brokerSocket(s), gate.RelayName(r.EgressRelay()))
		if err := c.Start(ctx, r.EgressRelay(), netip.AddrPort{}); err != nil {
			return nil, err
		}
		return c, nil
	}
	eb, ok := v.(egressBridger)
	if !ok {
		return nil, usageErrorf("target %s: an egress policy is enforced here on docker only", v.Name())
	}
	bridge, gw, err := eb.EgressBridge(ctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(brokerURL)
	var addr netip.AddrPort
	if err == nil {
		addr, err = netip.ParseAddrPort(u.Host)
	}
	if err != nil {
		return nil, fmt.Errorf("egress: the broker's URL %s is not an address of this machine: %w", brokerURL, err)
	}
	if _, err := a.ensureLocalBroker(ctx, s); err != nil {
		return nil, err
	}
	c := gate.Dial(brokerSocket(s), bridge)
	if err := c.Start(ctx, gw, addr); err != nil {
		return nil, err
	}
	return c, nil
}

// netOptions are the flags and argument of `boxctl net`.
type netOptions struct {
	box         string
	allow, deny []string
}

func newNetCmd(a *app, runF func(context.Context, *netOptions) error) *cobra.Command {
	o := &netOptions{}
	cmd := &cobra.Command{
		Use:   "net <box>",
		Short: "Show or change the egress policy of a running box",
		Long: `net prints the egress policy of a confined box (up's default), and with --allow
or --deny changes it: the change holds when net returns (new connections and name
lookups see it, and connections it no longer allows are closed); on Kubernetes an
address rule holds once the cluster's network plugin applies the box's NetworkPolicy,
a domain rule at once. RULE is a
domain (example.com, *.example.com), an IPv4 address or CIDR, each with an optional
port (example.com:443, 10.0.0.0/8:5432); --deny removes a rule the policy lists. A box
made open stays open, and a confined box is not opened.`,
		Example: `  boxctl net last
  boxctl net last --allow registry.npmjs.org:443 --deny example.com`,
		Args: boxArgs(cobra.ExactArgs(1)),
		RunE: verbRunE(a, o, func(args []string) error {
			o.box = args[0]
			for _, list := range [][]string{o.allow, o.deny} {
				if _, err := egress.ParseRules(list); err != nil {
					return usageError{err}
				}
			}
			return nil
		}, runF, runNet),
	}
	cmd.Flags().StringArrayVar(&o.allow, "allow", nil, "add RULE to the box's allow list (repeatable)")
	cmd.Flags().StringArrayVar(&o.deny, "deny", nil, "remove RULE from the box's allow list (repeatable)")
	return cmd
}

// errNotConfined is the error of net on a box made without a policy,
// or open.
var errNotConfined = errors.New("the box was made open (up --egress open, or before egress was denied by default): its network stays open")

func runNet(ctx context.Context, a *app, o *netOptions) error {
	s, st, err := a.readState()
	if err != nil {
		return err
	}
	rec, err := st.Resolve(o.box)
	if err != nil {
		return err
	}
	if rec.Egress == nil || rec.Egress.Open {
		return usageError{errNotConfined}
	}
	p := *rec.Egress
	if len(o.allow)+len(o.deny) > 0 {
		allow, _ := egress.ParseRules(o.allow)
		deny, _ := egress.ParseRules(o.deny)
		p = p.With(allow...).Without(deny...)
		if err := setNet(ctx, a, s, rec, p); err != nil {
			return err
		}
	}
	return a.print(map[string]any{"id": rec.ID, "egress": p}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s\t%s\n", shortID(rec.ID), p.Summary())
		return err
	})
}

// setNet gives rec's running box policy p at the user's broker's gate and
// records it.
func setNet(ctx context.Context, a *app, s *boxstate.Store, rec *boxstate.Record, p egress.Policy) error {
	v, closeVendor, err := a.openVendor(rec.Target)
	if err != nil {
		return err
	}
	defer closeVendor()
	box, err := v.Connect(ctx, rec.ID)
	if err != nil {
		return err
	}
	bc, err := a.ensureBroker(ctx, s, v)
	if err != nil {
		return err
	}
	url := rec.BrokerURL
	if url == "" {
		if url, err = brokerURL(ctx, bc, v); err != nil {
			return err
		}
	}
	if enf, own := v.(vendors.EgressEnforcer); own {
		// The vendor holds the box's rules: it is told them, the broker
		// among them.
		setter, ok := box.(vendors.EgressSetter)
		if !ok {
			return usageError{fmt.Errorf("target %s: %w", rec.Target, &vendors.UnsupportedError{Vendor: v.Name(), Field: vendors.FieldEgress})}
		}
		vp, err := sandbox.VendorEgress(p, url, enf.EgressRules())
		if err != nil {
			return err
		}
		if enf.EgressRules().Relay {
			// The relay holds the domains, by the box's address: it first
			// (a narrowed list holds at once), put back if the vendor's
			// rules fail.
			old, err := sandbox.VendorEgress(*rec.Egress, url, enf.EgressRules())
			if err != nil {
				return err
			}
			if err := setRelayed(ctx, a, s, v, box, url, vp); err != nil {
				return err
			}
			if err := setter.SetEgress(ctx, vp); err != nil {
				return errors.Join(err, setRelayed(context.WithoutCancel(ctx), a, s, v, box, url, old))
			}
		} else if err := setter.SetEgress(ctx, vp); err != nil {
			return err
		}
		return recordEgress(ctx, s, rec.ID, p)
	}
	if err := setRelayed(ctx, a, s, v, box, url, p); err != nil {
		return err
	}
	return recordEgress(ctx, s, rec.ID, p)
}

// recordEgress records box id's policy p in the state.
func recordEgress(ctx context.Context, s *boxstate.Store, id string, p egress.Policy) error {
	return s.Update(ctx, func(st *boxstate.State) error {
		if r := st.Find(id); r != nil {
			r.Egress = &p
		}
		return nil
	})
}

// setRelayed gives the gate that holds box's policy (Docker's, or the
// relay of a Kubernetes box) the policy p, by the box's address.
func setRelayed(ctx context.Context, a *app, s *boxstate.Store, v vendors.Vendor, box vendors.Box, brokerURL string, p egress.Policy) error {
	ad, ok := box.(vendors.Addressed)
	if !ok {
		return usageErrorf("target %s: boxctl holds no egress gate for its boxes (they do not tell their address)", v.Name())
	}
	addr, err := ad.Address(ctx)
	if err != nil {
		return err
	}
	g, err := a.egressGate(ctx, s, v, brokerURL)
	if err != nil {
		return err
	}
	return g.Set(ctx, addr, p)
}
