package kubernetes

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The pod a box waits for is judged by its state, but a pod being deleted
// (the one of before a suspend, still in the API server's cache while the
// resumed box starts) never fails the wait.
func TestReadyWait_pod(t *testing.T) {
	failed := corev1.PodStatus{Phase: corev1.PodFailed, Message: "Pod failed"}
	crashing := corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "box",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}
	deleting := metav1.ObjectMeta{Name: "p", DeletionTimestamp: new(metav1.Now())}
	tests := []struct {
		name   string
		pod    corev1.Pod
		reason string // "" when the wait goes on
	}{
		{"starting", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, ""},
		{"failed", corev1.Pod{Status: failed}, "Failed"},
		{"crash looping", corev1.Pod{Status: crashing}, "CrashLoopBackOff"},
		{"failed and being deleted", corev1.Pod{ObjectMeta: deleting, Status: failed}, ""},
		{"crash looping and being deleted", corev1.Pod{ObjectMeta: deleting, Status: crashing}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := readyWait{b: &Box{id: "box"}, last: NotReadyError{ID: "box"}}
			err := w.pod(&tt.pod)
			var nr *NotReadyError
			switch {
			case tt.reason == "" && err != nil:
				t.Errorf("pod() = %v, want the wait to go on", err)
			case tt.reason != "" && (!errors.As(err, &nr) || nr.Reason != tt.reason):
				t.Errorf("pod() = %v, want a *NotReadyError %s", err, tt.reason)
			}
		})
	}
}
