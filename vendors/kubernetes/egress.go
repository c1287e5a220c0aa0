package kubernetes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
)

// LabelEgressBox holds, on the pod of a box whose egress is confined, the
// name of its Sandbox: its NetworkPolicy (of the same name) selects it.
const LabelEgressBox = boxmeta.LabelPrefix + "egress-box"

// BaselinePolicy is the NetworkPolicy every confined box's pod is under
// beside its own: it selects each pod that carries LabelEgressBox and
// allows nothing, in or out. Policies add up, so a confined pod whose
// own policy is gone (its box being destroyed, a fork's not made yet)
// reaches nothing rather than everything.
const BaselinePolicy = "boxctl-egress-baseline"

// annotationRelay records, on a box's NetworkPolicy, the relay its pod
// asks for names: a change keeps it.
const annotationRelay = boxmeta.LabelPrefix + "egress-relay"

// WithEgressRelay confines boxes created with an egress policy (not Open)
// to relay, an IPv4 address of a relay and resolver of the caller's (a
// gate.Gate without a bridge: ports 80, 443 and 53 there) that the
// cluster's pods reach: each such box gets a NetworkPolicy that lets its
// pod reach relay on those ports, the policy's addresses (on their
// ports, TCP only) and nothing else, and takes no traffic in; its pod
// asks relay for names. The cluster must enforce NetworkPolicies (a
// network plugin that does, pod-to-node traffic included), apply them to
// IPv6 or have none, and let pods reach relay without masquerade: the
// relay knows a box by its pod's address. The plugin applies the
// policies to a new pod shortly after it starts (kube-router: at the sync
// its event drives), before any turn of the box's; BaselinePolicy keeps
// a labelled pod denied when its own policy goes first (a destroy).
// Default: none, and a policy is refused.
func WithEgressRelay(relay netip.Addr) Option { return func(o *options) { o.relay = relay } }

var (
	_ vendors.EgressEnforcer = (*Vendor)(nil)
	_ vendors.EgressSetter   = (*Box)(nil)
	_ vendors.EgressBlocks   = (*Box)(nil)
)

// EgressRules: addresses with ports, and domains through the caller's
// relay (WithEgressRelay).
func (v *Vendor) EgressRules() vendors.EgressRules {
	return vendors.EgressRules{Domains: true, Ports: true, Relay: true}
}

// EgressRelay returns the relay's address (WithEgressRelay), invalid for
// none.
func (v *Vendor) EgressRelay() netip.Addr { return v.o.relay }

// checkRelay refuses a relay address a box must never be let reach by
// it: not a unicast IPv4 address, or loopback, link-local or unspecified.
func checkRelay(a netip.Addr) error {
	if !a.Is4() || !a.IsGlobalUnicast() && !a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() {
		return fmt.Errorf("kubernetes: egress relay %v: want a unicast IPv4 address the pods reach, not loopback, link-local or unspecified", a)
	}
	return nil
}

// ensureBaseline makes BaselinePolicy once per vendor (it may exist).
func (v *Vendor) ensureBaseline(ctx context.Context) error {
	v.mu.Lock()
	done := v.baseline
	v.mu.Unlock()
	if done {
		return nil
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: BaselinePolicy, Labels: map[string]string{boxmeta.LabelManaged: "true"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: LabelEgressBox, Operator: metav1.LabelSelectorOpExists}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := v.core.NetworkingV1().NetworkPolicies(v.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: network policy %s: %w", BaselinePolicy, v.mapErr(err, ""))
	}
	v.mu.Lock()
	v.baseline = true
	v.mu.Unlock()
	return nil
}

// confinedSpec reports whether spec asks for a policy that is not Open.
func confinedSpec(spec vendors.CreateSpec) bool { return spec.Egress != nil && !spec.Egress.Open }

// confinePod points the pod's resolver at the relay and labels it for its
// NetworkPolicy.
func (v *Vendor) confinePod(sb *agentsv1.Sandbox) {
	ps := &sb.Spec.PodTemplate.Spec
	ps.DNSPolicy = corev1.DNSNone
	ps.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{v.o.relay.String()},
		Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: new("1")}}}
	if sb.Spec.PodTemplate.ObjectMeta.Labels == nil {
		sb.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{}
	}
	sb.Spec.PodTemplate.ObjectMeta.Labels[LabelEgressBox] = sb.Name
}

// networkPolicy is the NetworkPolicy of box name under p: its pod takes
// no traffic in, and reaches the relay (DNS, HTTP, TLS) and p's addresses
// on their ports, never link-local.
func (v *Vendor) networkPolicy(ctx context.Context, name string, p egress.Policy) (*networkingv1.NetworkPolicy, error) {
	rules, err := v.boxEgressRules(ctx, p)
	if err != nil {
		return nil, err
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{boxmeta.LabelManaged: "true"},
			Annotations: map[string]string{annotationRelay: v.o.relay.String()}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelEgressBox: name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      rules,
		},
	}, nil
}

// egressRules are a NetworkPolicy's egress rules for p, with the relay at
// relay.
func egressRules(relay netip.Addr, p egress.Policy) []networkingv1.NetworkPolicyEgressRule {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(proto *corev1.Protocol, n uint16) networkingv1.NetworkPolicyPort {
		np := networkingv1.NetworkPolicyPort{Protocol: proto}
		if n != 0 {
			np.Port = new(intstr.FromInt32(int32(n)))
		}
		return np
	}
	out := []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(relay, 32).String()}}},
		Ports: []networkingv1.NetworkPolicyPort{port(&udp, 53), port(&tcp, 53), port(&tcp, 80), port(&tcp, 443)},
	}}
	for _, r := range p.Prefixes() {
		block := &networkingv1.IPBlock{CIDR: r.Prefix.Masked().String()}
		if r.Prefix.Overlaps(firewall.LinkLocal) && r.Prefix.Bits() < firewall.LinkLocal.Bits() {
			block.Except = []string{firewall.LinkLocal.String()}
		} else if firewall.LinkLocal.Contains(r.Prefix.Addr()) {
			continue // never link-local: the cloud's metadata address is there
		}
		out = append(out, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: block}},
			Ports: []networkingv1.NetworkPolicyPort{port(&tcp, r.Port)},
		})
	}
	return out
}

// createNetworkPolicy makes box name's NetworkPolicy before its pod
// exists, so that the pod never runs unconfined.
func (v *Vendor) createNetworkPolicy(ctx context.Context, name string, p egress.Policy) error {
	if err := v.ensureBaseline(ctx); err != nil {
		return err
	}
	np, err := v.networkPolicy(ctx, name, p)
	if err != nil {
		return err
	}
	_, err = v.core.NetworkingV1().NetworkPolicies(v.ns).Create(ctx, np, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: network policy %s: %w", name, v.mapErr(err, name))
	}
	return nil
}

// ownNetworkPolicy makes sb the owner of its NetworkPolicy, so that the
// cluster deletes the policy with the Sandbox, whoever deletes it.
func (v *Vendor) ownNetworkPolicy(ctx context.Context, sb *agentsv1.Sandbox) error {
	ref := metav1.NewControllerRef(sb, agentsv1.GroupVersion.WithKind("Sandbox"))
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := v.core.NetworkingV1().NetworkPolicies(v.ns).Get(ctx, sb.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		np.OwnerReferences = []metav1.OwnerReference{*ref}
		_, err = v.core.NetworkingV1().NetworkPolicies(v.ns).Update(ctx, np, metav1.UpdateOptions{})
		return err
	})
}

// deleteNetworkPolicy deletes box id's NetworkPolicy; none is not an error.
func (v *Vendor) deleteNetworkPolicy(ctx context.Context, id string) error {
	err := v.core.NetworkingV1().NetworkPolicies(v.ns).Delete(ctx, id, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("network policy: %w", err)
	}
	return nil
}

// SetEgress replaces the box's NetworkPolicy's rules with p's (not Open);
// the cluster's network plugin applies it to new connections, and the
// caller's relay holds p's domains. A box created without a policy is
// refused: its pod was never confined.
func (b *Box) SetEgress(ctx context.Context, p egress.Policy) error {
	if p.Open {
		return &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("egress: a confined box cannot be opened")}
	}
	if err := p.Validate(); err != nil {
		return &vendors.SpecError{Vendor: Name, Err: err}
	}
	if !b.v.o.relay.IsValid() {
		return &vendors.UnsupportedError{Vendor: Name, Field: vendors.FieldEgress}
	}
	rules, err := b.v.boxEgressRules(ctx, p)
	if err != nil {
		return err
	}
	nps := b.v.core.NetworkingV1().NetworkPolicies(b.v.ns)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := nps.Get(ctx, b.id, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// The pod asks the relay it was made with for names: the rules
		// keep leading there, and only there.
		if r := np.Annotations[annotationRelay]; r != "" && r != b.v.o.relay.String() {
			return &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("egress: box %s was confined through the relay at %s, not this vendor's %s", b.id, r, b.v.o.relay)}
		}
		np.Spec.Egress = rules
		_, err = nps.Update(ctx, np, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: set egress of box %s: it was created without an egress policy (or is gone): %w", b.id, b.v.mapErr(err, b.id))
	}
	if err != nil {
		return fmt.Errorf("kubernetes: set egress of box %s: %w", b.id, b.v.mapErr(err, b.id))
	}
	return nil
}

// EgressBlocks reads back the address blocks the box's NetworkPolicy lets
// it reach, as the cluster holds it.
func (b *Box) EgressBlocks(ctx context.Context) ([]vendors.EgressBlock, error) {
	np, err := b.NetworkPolicy(ctx)
	if err != nil {
		return nil, err
	}
	var out []vendors.EgressBlock
	for _, rule := range np.Spec.Egress {
		var ports []string
		for _, p := range rule.Ports {
			s := "tcp"
			if p.Protocol != nil {
				s = strings.ToLower(string(*p.Protocol))
			}
			if p.Port != nil {
				s += "/" + p.Port.String()
			}
			ports = append(ports, s)
		}
		if len(rule.To) == 0 {
			// A rule without peers reaches everything.
			out = append(out, vendors.EgressBlock{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Ports: ports})
		}
		for _, peer := range rule.To {
			if peer.IPBlock == nil {
				return nil, fmt.Errorf("kubernetes: network policy of box %s: a peer by selector, not by address: %+v", b.id, peer)
			}
			blk := vendors.EgressBlock{Ports: ports}
			if blk.Prefix, err = netip.ParsePrefix(peer.IPBlock.CIDR); err != nil {
				return nil, fmt.Errorf("kubernetes: network policy of box %s: %w", b.id, err)
			}
			for _, e := range peer.IPBlock.Except {
				ep, err := netip.ParsePrefix(e)
				if err != nil {
					return nil, fmt.Errorf("kubernetes: network policy of box %s: %w", b.id, err)
				}
				blk.Except = append(blk.Except, ep)
			}
			out = append(out, blk)
		}
	}
	return out, nil
}

// forkNetworkPolicy gives fork a NetworkPolicy of its own with the rules
// of src's, before fork's pod exists; the fork's pod template is
// labelled for it. A source without a policy is no error: its forks are
// open as it is.
func (v *Vendor) forkNetworkPolicy(ctx context.Context, src string, fork *agentsv1.Sandbox) error {
	np, err := v.core.NetworkingV1().NetworkPolicies(v.ns).Get(ctx, src, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubernetes: network policy of box %s: %w", src, v.mapErr(err, src))
	}
	if err := v.ensureBaseline(ctx); err != nil {
		return err
	}
	out := np.DeepCopy()
	out.ObjectMeta = metav1.ObjectMeta{Name: fork.Name, Labels: np.Labels, Annotations: np.Annotations}
	out.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{LabelEgressBox: fork.Name}}
	if _, err := v.core.NetworkingV1().NetworkPolicies(v.ns).Create(ctx, out, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes: network policy %s: %w", fork.Name, v.mapErr(err, fork.Name))
	}
	if fork.Spec.PodTemplate.ObjectMeta.Labels == nil {
		fork.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{}
	}
	fork.Spec.PodTemplate.ObjectMeta.Labels[LabelEgressBox] = fork.Name
	return nil
}

// NetworkPolicy returns the NetworkPolicy that confines the box, as the
// cluster holds it.
func (b *Box) NetworkPolicy(ctx context.Context) (*networkingv1.NetworkPolicy, error) {
	np, err := b.v.core.NetworkingV1().NetworkPolicies(b.v.ns).Get(ctx, b.id, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: network policy of box %s: %w", b.id, b.v.mapErr(err, b.id))
	}
	return np, nil
}
