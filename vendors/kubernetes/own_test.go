package kubernetes

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1alpha1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"
)

// TestOwnPod: the claim an adopted pod names keeps it and becomes its
// controller through its Sandbox, in place of another; any other claim
// lost it.
func TestOwnPod(t *testing.T) {
	sb := &agentsv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box-a", UID: "sandbox-a"}}
	other := *metav1.NewControllerRef(&agentsv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "box-b", UID: "sandbox-b"}}, agentsv1.GroupVersion.WithKind("Sandbox"))
	mine := *metav1.NewControllerRef(sb, agentsv1.GroupVersion.WithKind("Sandbox"))
	tests := []struct {
		name    string
		claim   types.UID
		refs    []metav1.OwnerReference
		wantErr error
	}{
		{"named, no controller", "claim-a", nil, nil},
		{"named, another Sandbox's", "claim-a", []metav1.OwnerReference{other}, nil},
		{"named, ours already", "claim-a", []metav1.OwnerReference{mine}, nil},
		{"another claim's", "claim-b", nil, errLostPod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "pool-x", Namespace: "ns", OwnerReferences: tt.refs,
					Labels: map[string]string{extv1.SandboxIDLabel: string(tt.claim)}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
			}
			v := &Vendor{core: fake.NewClientset(pod), ns: "ns"}
			ready, err := v.ownPod(t.Context(), &Box{id: "box-a", pod: "pool-x"}, sb, "claim-a")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ownPod = %v, want %v", err, tt.wantErr)
			}
			got, _ := v.core.CoreV1().Pods("ns").Get(t.Context(), "pool-x", metav1.GetOptions{})
			ref := metav1.GetControllerOf(got)
			if tt.wantErr == nil && (!ready || ref == nil || ref.UID != sb.UID || len(got.OwnerReferences) != 1) {
				t.Errorf("ready %v, owners %+v; want ready, controlled by box-a alone", ready, got.OwnerReferences)
			}
			if tt.wantErr != nil && ref != nil {
				t.Errorf("a lost pod was changed: %+v", got.OwnerReferences)
			}
		})
	}
}
