package kubernetes

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tangle-network/boxctl/vendors/egress"
)

// WithBrokerService lets each confined box reach the credential broker
// that runs in the cluster behind the Service name in namespace ns: its
// NetworkPolicy allows the pods the Service selects (in ns), on the
// Service's target ports. A NetworkPolicy sees a Service's traffic after
// its address was translated, at the pod's: a rule for the Service's
// address alone reaches nothing. Give the boxes the Service's cluster
// address as the broker's URL (their resolver is the relay, which names
// only what their policy allows). Default: none, and a broker is reached
// by its address only.
func WithBrokerService(ns, name string) Option {
	return func(o *options) { o.brokerSvc = [2]string{ns, name} }
}

// brokerRule is the egress rule to the broker's pods (WithBrokerService),
// nil for none; read from the Service once per vendor.
func (v *Vendor) brokerRule(ctx context.Context) (*networkingv1.NetworkPolicyEgressRule, error) {
	ns, name := v.o.brokerSvc[0], v.o.brokerSvc[1]
	if name == "" {
		return nil, nil
	}
	v.mu.Lock()
	r := v.brokerPeer
	v.mu.Unlock()
	if r != nil {
		return r, nil
	}
	svc, err := v.core.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: the broker's Service %s/%s: %w", ns, name, v.mapErr(err, ""))
	}
	r, err = brokerPeerRule(svc)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.brokerPeer = r
	v.mu.Unlock()
	return r, nil
}

// brokerPeerRule is the egress rule to the pods svc selects, on its target
// ports.
func brokerPeerRule(svc *corev1.Service) (*networkingv1.NetworkPolicyEgressRule, error) {
	if len(svc.Spec.Selector) == 0 {
		return nil, fmt.Errorf("kubernetes: the broker's Service %s/%s selects no pods", svc.Namespace, svc.Name)
	}
	r := &networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: svc.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(svc.Spec.Selector)},
	}}}
	for _, p := range svc.Spec.Ports {
		if p.Name == "admin" || p.TargetPort.StrVal == "admin" {
			// Boxes must never reach a broker's admin API.
			return nil, fmt.Errorf("kubernetes: the Service %s/%s leads to an admin port: name the Service boxes reach", svc.Namespace, svc.Name)
		}
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		target := p.TargetPort
		if target.IntVal == 0 && target.StrVal == "" {
			target.IntVal = p.Port // no target port: the port itself
		}
		r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &target})
	}
	if len(r.Ports) == 0 {
		return nil, fmt.Errorf("kubernetes: the broker's Service %s/%s has no port", svc.Namespace, svc.Name)
	}
	return r, nil
}

// boxEgressRules are the rules of a confined box's NetworkPolicy under p:
// the relay's and p's (egressRules), and the broker's pods'.
func (v *Vendor) boxEgressRules(ctx context.Context, p egress.Policy) ([]networkingv1.NetworkPolicyEgressRule, error) {
	rules := egressRules(v.o.relay, p)
	br, err := v.brokerRule(ctx)
	if err != nil || br == nil {
		return rules, err
	}
	return append(rules, *br.DeepCopy()), nil
}
