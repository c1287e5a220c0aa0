package kubernetes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestBrokerPeerRule: the rule selects the Service's pods in its
// namespace, on each port's target (named, numbered, or the port itself),
// and a Service that selects nothing or has no port is refused.
func TestBrokerPeerRule(t *testing.T) {
	sel := map[string]string{"app.kubernetes.io/name": "boxctl-broker"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "brokers", Name: "boxctl-broker"},
		Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{
			{Port: 80, TargetPort: intstr.FromString("boxes")},
			{Port: 81, TargetPort: intstr.FromInt32(8081), Protocol: corev1.ProtocolTCP},
			{Port: 82},
		}}}
	r, err := brokerPeerRule(svc)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.To) != 1 || r.To[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "brokers" ||
		r.To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "boxctl-broker" || r.To[0].IPBlock != nil {
		t.Errorf("peer = %+v", r.To)
	}
	want := []string{"boxes", "8081", "82"}
	if len(r.Ports) != len(want) {
		t.Fatalf("ports = %+v", r.Ports)
	}
	for i, p := range r.Ports {
		if p.Port.String() != want[i] || *p.Protocol != corev1.ProtocolTCP {
			t.Errorf("port %d = %s/%s, want TCP/%s", i, *p.Protocol, p.Port.String(), want[i])
		}
	}
	sel["x"] = "y"
	if len(r.To[0].PodSelector.MatchLabels) != 1 {
		t.Error("the rule shares the Service's selector map")
	}
	for name, s := range map[string]*corev1.Service{
		"no selector": {Spec: corev1.ServiceSpec{Ports: svc.Spec.Ports}},
		"no port":     {Spec: corev1.ServiceSpec{Selector: sel}},
		"an admin port": {Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Name: "admin", Port: 9443,
			TargetPort: intstr.FromString("admin")}}}},
	} {
		if _, err := brokerPeerRule(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
