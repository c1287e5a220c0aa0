package kubernetes

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

func TestBoxName(t *testing.T) {
	for _, tag := range []string{"run-abc", "Run_Tag.With.Dots", "x", "-", "a-very-long-run-tag-that-goes-on-and-on-and-on-for-ever-and-ever", "ends-with-"} {
		n := boxName(tag)
		if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
			t.Errorf("boxName(%q) = %q: %v", tag, n, errs)
		}
		if !strings.HasPrefix(n, "boxctl-") {
			t.Errorf("boxName(%q) = %q, want the boxctl- prefix", tag, n)
		}
	}
	if boxName("a") == boxName("a") {
		t.Error("two names for one run tag are equal")
	}
}

func TestLabels(t *testing.T) {
	spec := vendors.CreateSpec{Image: "i", Lifetime: time.Minute, RunTag: "tag-", Owner: "pid:host:12:34",
		Labels: map[string]string{"team": "infra", "example.com/note": "has spaces"}}
	all := vendors.Labels(spec, time.Unix(1000, 0), "v1.2.3+dirty")
	meta, err := objectMeta("boxctl-x", all)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range meta.Labels {
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			t.Errorf("label %s=%q is not a Kubernetes label", k, v)
		}
	}
	for _, k := range []string{boxmeta.LabelOwner, boxmeta.LabelRunTag, boxmeta.LabelVersion, "example.com/note"} {
		if _, ok := meta.Labels[k]; ok {
			t.Errorf("%s=%q became a label; its value is not a label value", k, all[k])
		}
	}
	if meta.Labels[boxmeta.LabelManaged] != "true" || meta.Labels["team"] != "infra" {
		t.Errorf("labels = %v, want managed and team", meta.Labels)
	}
	got := boxLabels(meta)
	for k, v := range all {
		if got[k] != v {
			t.Errorf("label %s = %q after the round trip, want %q", k, got[k], v)
		}
	}
}

func TestCheckSpec(t *testing.T) {
	for name, tc := range map[string]struct {
		spec vendors.CreateSpec
		ok   bool
	}{
		"plain":        {vendors.CreateSpec{}, true},
		"label key":    {vendors.CreateSpec{Labels: map[string]string{"a b": "c"}}, false},
		"env":          {vendors.CreateSpec{Env: map[string]string{"A_1": "x"}}, true},
		"env name":     {vendors.CreateSpec{Env: map[string]string{"1A": "x"}}, false},
		"lifetime env": {vendors.CreateSpec{Env: map[string]string{boxmeta.EnvLifetime: "1"}}, false},
		"runtime":      {vendors.CreateSpec{Runtime: "gvisor"}, true},
		"bad runtime":  {vendors.CreateSpec{Runtime: "G V"}, false},
	} {
		if err := checkSpec(tc.spec); (err == nil) != tc.ok {
			t.Errorf("%s: checkSpec = %v, want ok %v", name, err, tc.ok)
		}
	}
}

func TestSandboxState(t *testing.T) {
	now := metav1.Now()
	cond := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: string(agentsv1.SandboxConditionReady), Status: status, Reason: reason}}
	}
	for _, tc := range []struct {
		sb   agentsv1.Sandbox
		want vendors.State
	}{
		{agentsv1.Sandbox{}, vendors.StateCreating},
		{agentsv1.Sandbox{Status: agentsv1.SandboxStatus{Conditions: cond(metav1.ConditionTrue, "DependenciesReady")}}, vendors.StateRunning},
		{agentsv1.Sandbox{Status: agentsv1.SandboxStatus{Conditions: cond(metav1.ConditionFalse, "DependenciesNotReady")}}, vendors.StateCreating},
		{agentsv1.Sandbox{Status: agentsv1.SandboxStatus{Conditions: cond(metav1.ConditionFalse, agentsv1.SandboxReasonExpired)}}, vendors.StateStopped},
		{agentsv1.Sandbox{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, vendors.StateStopped},
		{agentsv1.Sandbox{Spec: agentsv1.SandboxSpec{OperatingMode: agentsv1.SandboxOperatingModeSuspended},
			Status: agentsv1.SandboxStatus{Conditions: cond(metav1.ConditionFalse, agentsv1.SandboxReasonSuspended)}}, vendors.StateSuspended},
		{agentsv1.Sandbox{Status: agentsv1.SandboxStatus{Conditions: append(cond(metav1.ConditionFalse, "DependenciesNotReady"),
			metav1.Condition{Type: string(agentsv1.SandboxConditionFinished), Status: metav1.ConditionTrue, Reason: agentsv1.SandboxReasonPodFailed})}}, vendors.StateStopped},
	} {
		if got := sandboxState(&tc.sb); got != tc.want {
			t.Errorf("sandboxState(%+v) = %s, want %s", tc.sb.Status, got, tc.want)
		}
	}
}
