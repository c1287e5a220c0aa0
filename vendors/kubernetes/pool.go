package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// EnsurePool creates or updates the template and the warm pool of spec
// (and a standby pool's Secret). A pool's boxes run until claimed (their
// init's lifetime is the longest a box may have); a claimed box ends at
// its claim's shutdown time. The pool replaces its idle boxes when the
// template changes (the Recreate update strategy), and no claim adopts
// one of the old template meanwhile.
func (v *Vendor) EnsurePool(ctx context.Context, spec vendors.PoolSpec) error {
	if spec.Name == "" || spec.Image == "" || spec.Replicas < 0 {
		return errors.New("kubernetes: pool: want a name, an image and replicas >= 0")
	}
	if err := v.checkAPI(ctx, groupAgents, groupExtensions); err != nil {
		return err
	}
	res := spec.Resources.Or(v.o.resources)
	life := strconv.Itoa(int(vendors.MaxLifetime / time.Second))
	podSpec := boxPodSpec(spec.Image, []corev1.EnvVar{{Name: boxmeta.EnvLifetime, Value: life}}, nil, v.resources(res), v.o.grace)
	var annotations map[string]string
	if s := spec.Standby; s != nil {
		if s.Harness == "" {
			return errors.New("kubernetes: pool: a standby pool wants a harness")
		}
		if err := v.ensureStandbySecret(ctx, spec.Name); err != nil {
			return err
		}
		podSpec = standbyPodSpec(podSpec, *s, StandbySecret(spec.Name))
		annotations = map[string]string{HarnessAnnotation: s.Harness}
	}
	tmpl := &extv1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: map[string]string{boxmeta.LabelManaged: "true"}, Annotations: annotations},
		Spec: extv1.SandboxTemplateSpec{
			SandboxBlueprint: agentsv1.SandboxBlueprint{PodTemplate: agentsv1.PodTemplate{Spec: podSpec}, Service: new(false)},
			// Boxes reach what their network allows; the vendor makes no
			// NetworkPolicy of its own.
			NetworkPolicyManagement: extv1.NetworkPolicyManagementUnmanaged,
			// A claim carries nothing into the pod: a box's secrets come
			// with its claim of the bridge (standby) or a Sandbox of its
			// own (a spec with an environment).
			EnvVarsInjectionPolicy:     extv1.EnvVarsInjectionPolicyDisallowed,
			VolumeClaimTemplatesPolicy: extv1.VolumeClaimTemplatesPolicyDisallowed,
		},
	}
	ext := v.ext.ExtensionsV1beta1()
	if cur, err := ext.SandboxTemplates(v.ns).Get(ctx, spec.Name, metav1.GetOptions{}); err == nil {
		if !equality.Semantic.DeepEqual(cur.Spec, tmpl.Spec) || cur.Annotations[HarnessAnnotation] != annotations[HarnessAnnotation] {
			cur.Spec = tmpl.Spec
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			if h := annotations[HarnessAnnotation]; h != "" {
				cur.Annotations[HarnessAnnotation] = h
			} else {
				delete(cur.Annotations, HarnessAnnotation)
			}
			if _, err := ext.SandboxTemplates(v.ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("kubernetes: pool %s: template: %w", spec.Name, err)
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: pool %s: template: %w", spec.Name, err)
	} else if _, err := ext.SandboxTemplates(v.ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes: pool %s: template: %w", spec.Name, err)
	}
	pool := &extv1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: map[string]string{boxmeta.LabelManaged: "true"}},
		Spec: extv1.SandboxWarmPoolSpec{Replicas: new(spec.Replicas), TemplateRef: extv1.SandboxTemplateRef{Name: spec.Name},
			UpdateStrategy: &extv1.SandboxWarmPoolUpdateStrategy{Type: extv1.RecreateSandboxWarmPoolUpdateStrategyType}},
	}
	if cur, err := ext.SandboxWarmPools(v.ns).Get(ctx, spec.Name, metav1.GetOptions{}); err == nil {
		cur.Spec = pool.Spec
		_, err = ext.SandboxWarmPools(v.ns).Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes: pool %s: %w", spec.Name, err)
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: pool %s: %w", spec.Name, err)
	} else if _, err := ext.SandboxWarmPools(v.ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubernetes: pool %s: %w", spec.Name, err)
	}
	return nil
}

// WaitPool waits until the pool named name has all its replicas ready:
// as many ready Sandboxes of its own as it wants (its status lags a
// claim's adoption of one).
func (v *Vendor) WaitPool(ctx context.Context, name string) error {
	if err := v.checkAPI(ctx, groupAgents, groupExtensions); err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := v.ext.ExtensionsV1beta1().SandboxWarmPools(v.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes: pool %s: %w", name, err)
		}
		idle, err := v.idleSandboxes(ctx, name)
		if err != nil {
			return err
		}
		n, want := countReady(idle), int(ptr.Deref(p.Spec.Replicas, 1))
		if n >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes: pool %s: %d of %d ready: %w", name, n, want, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// countReady counts the Ready Sandboxes of sbs.
func countReady(sbs []agentsv1.Sandbox) int {
	n := 0
	for i := range sbs {
		if sandboxReady(&sbs[i]) {
			n++
		}
	}
	return n
}

// sandboxReady reports whether sb's Ready condition holds.
func sandboxReady(sb *agentsv1.Sandbox) bool {
	c := meta.FindStatusCondition(sb.Status.Conditions, string(agentsv1.SandboxConditionReady))
	return c != nil && c.Status == metav1.ConditionTrue
}

// DeletePool deletes the pool, the template and the standby Secret named
// after name, and the pool's idle Sandboxes with them; boxes claimed from
// it live on.
func (v *Vendor) DeletePool(ctx context.Context, name string) error {
	if err := v.checkAPI(ctx, groupAgents, groupExtensions); err != nil {
		return err
	}
	bg := metav1.DeletePropagationBackground
	ext := v.ext.ExtensionsV1beta1()
	var errs []error
	if err := ext.SandboxWarmPools(v.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := ext.SandboxTemplates(v.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := v.core.CoreV1().Secrets(v.ns).Delete(ctx, StandbySecret(name), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kubernetes: delete pool %s: %w", name, err)
	}
	return nil
}

// poolsFor returns the warm pools a create of spec may claim from, in
// order: the request's (CreateSpec.Pool), then the vendor's
// (WithWarmPool); none when spec asks for what no pool's box has.
func (v *Vendor) poolsFor(spec vendors.CreateSpec) []string {
	if !claimable(spec) {
		return nil
	}
	var out []string
	for _, p := range []string{spec.Pool, v.o.pool} {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// claimable reports whether a warm box can serve spec: it asks for nothing
// a pool's pod was not started with.
func claimable(spec vendors.CreateSpec) bool {
	// A pool's pods were made before any policy, without one.
	return len(spec.Env) == 0 && spec.Resources == (vendors.Resources{}) && spec.Runtime == "" && spec.Retention == 0 && !confinedSpec(spec)
}

// Pools lists the warm pools boxctl made in the vendor's namespace, by
// name, with their status.
func (v *Vendor) Pools(ctx context.Context) ([]vendors.PoolSummary, error) {
	if err := v.checkAPI(ctx, groupAgents, groupExtensions); err != nil {
		return nil, err
	}
	l, err := v.ext.ExtensionsV1beta1().SandboxWarmPools(v.ns).List(ctx, metav1.ListOptions{LabelSelector: boxmeta.LabelManaged + "=true"})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pools: %w", v.mapErr(err, ""))
	}
	out := []vendors.PoolSummary{}
	for _, p := range l.Items {
		st, err := v.PoolState(ctx, p.Name)
		if errors.Is(err, vendors.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, vendors.PoolSummary{Name: p.Name, PoolStatus: st})
	}
	slices.SortFunc(out, func(a, b vendors.PoolSummary) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// idleSandboxes lists the unclaimed Sandboxes of pool name, oldest
// first: those the pool controls (a claim's adoption makes the claim
// their controller).
func (v *Vendor) idleSandboxes(ctx context.Context, name string) ([]agentsv1.Sandbox, error) {
	l, err := v.agents.AgentsV1beta1().Sandboxes(v.ns).List(ctx, metav1.ListOptions{LabelSelector: agentsv1.SandboxWarmPoolLabel})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: pool %s: sandboxes: %w", name, v.mapErr(err, ""))
	}
	var out []agentsv1.Sandbox
	for _, sb := range l.Items {
		ref := metav1.GetControllerOf(&sb)
		if ref != nil && ref.Kind == "SandboxWarmPool" && ref.Name == name && sb.DeletionTimestamp == nil {
			out = append(out, sb)
		}
	}
	slices.SortFunc(out, func(a, b agentsv1.Sandbox) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out, nil
}

// PoolState reads the pool named name.
func (v *Vendor) PoolState(ctx context.Context, name string) (vendors.PoolStatus, error) {
	if err := v.checkAPI(ctx, groupAgents, groupExtensions); err != nil {
		return vendors.PoolStatus{}, err
	}
	p, err := v.ext.ExtensionsV1beta1().SandboxWarmPools(v.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return vendors.PoolStatus{}, fmt.Errorf("kubernetes: pool %s: %w", name, v.mapErr(err, name))
	}
	idle, err := v.idleSandboxes(ctx, name)
	if err != nil {
		return vendors.PoolStatus{}, err
	}
	st := vendors.PoolStatus{Want: int(ptr.Deref(p.Spec.Replicas, 1)), Idle: len(idle), Ready: countReady(idle)}
	if len(idle) > 0 {
		st.Oldest = idle[0].CreationTimestamp.Time
	}
	return st, nil
}

// RecyclePool deletes the idle Sandboxes of pool name made more than
// maxAge ago, oldest first and at most a quarter of the pool (at least
// one) per call, so most of its ready boxes stay while the controller
// makes their replacements; it returns how many it deleted. A Sandbox a
// claim adopts meanwhile is not deleted: each delete is conditional on the
// Sandbox being as it was listed.
func (v *Vendor) RecyclePool(ctx context.Context, name string, maxAge time.Duration) (int, error) {
	if err := v.checkAPI(ctx, groupAgents, groupExtensions); err != nil {
		return 0, err
	}
	idle, err := v.idleSandboxes(ctx, name)
	if err != nil {
		return 0, err
	}
	limit := max(1, (len(idle)+3)/4)
	n := 0
	bg := metav1.DeletePropagationBackground
	var errs []error
	for i := range idle {
		sb := &idle[i]
		if n == limit || time.Since(sb.CreationTimestamp.Time) <= maxAge {
			break
		}
		err := v.agents.AgentsV1beta1().Sandboxes(v.ns).Delete(ctx, sb.Name, metav1.DeleteOptions{PropagationPolicy: &bg,
			Preconditions: &metav1.Preconditions{UID: &sb.UID, ResourceVersion: &sb.ResourceVersion}})
		switch {
		case err == nil:
			n++
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Claimed or gone since the list.
		default:
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("kubernetes: recycle pool %s: %w", name, err)
	}
	if n > 0 {
		v.o.logger.Debug("kubernetes pool recycled", "pool", name, "sandboxes", n, "max_age", maxAge)
	}
	return n, nil
}
