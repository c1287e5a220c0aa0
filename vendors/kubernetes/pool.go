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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1alpha1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// EnsurePool creates or updates the template and the warm pool of spec
// (and a standby pool's Secret). A pool's pods run until claimed (their
// init's lifetime is the longest a box may have); a claimed box ends at
// its claim's shutdown time.
func (v *Vendor) EnsurePool(ctx context.Context, spec vendors.PoolSpec) error {
	if spec.Name == "" || spec.Image == "" || spec.Replicas < 0 {
		return errors.New("kubernetes: pool: want a name, an image and replicas >= 0")
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
			PodTemplate: agentsv1.PodTemplate{Spec: podSpec},
			// Boxes reach what their network allows; the vendor makes no
			// NetworkPolicy of its own.
			NetworkPolicyManagement: extv1.NetworkPolicyManagementUnmanaged,
		},
	}
	ext := v.ext.ExtensionsV1alpha1()
	changed := false
	if cur, err := ext.SandboxTemplates(v.ns).Get(ctx, spec.Name, metav1.GetOptions{}); err == nil {
		if !equality.Semantic.DeepEqual(cur.Spec, tmpl.Spec) || cur.Annotations[HarnessAnnotation] != annotations[HarnessAnnotation] {
			cur.Spec, changed = tmpl.Spec, true
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
	if changed {
		// The pool keeps the pods it has: make it anew, so that no claim
		// adopts a pod of the old template.
		fg := metav1.DeletePropagationForeground
		if err := ext.SandboxWarmPools(v.ns).Delete(ctx, spec.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kubernetes: pool %s: %w", spec.Name, err)
		}
		if err := v.waitPoolGone(ctx, spec.Name); err != nil {
			return err
		}
	}
	pool := &extv1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: map[string]string{boxmeta.LabelManaged: "true"}},
		Spec:       extv1.SandboxWarmPoolSpec{Replicas: spec.Replicas, TemplateRef: extv1.SandboxTemplateRef{Name: spec.Name}},
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

// waitPoolGone waits until the pool named name (and, deleted in the
// foreground, its pods) is gone.
func (v *Vendor) waitPoolGone(ctx context.Context, name string) error {
	pools := v.ext.ExtensionsV1alpha1().SandboxWarmPools(v.ns)
	for {
		p, err := pools.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubernetes: pool %s: %w", name, err)
		}
		w, err := pools.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: p.ResourceVersion})
		if err != nil {
			return fmt.Errorf("kubernetes: pool %s: %w", name, err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Deleted {
				w.Stop()
				return nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return fmt.Errorf("kubernetes: pool %s: %w", name, context.Cause(ctx))
		}
	}
}

// WaitPool waits until the pool named name has all its replicas ready:
// as many ready pods of its own as it wants (its status lags a claim's
// adoption of a pod).
func (v *Vendor) WaitPool(ctx context.Context, name string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := v.ext.ExtensionsV1alpha1().SandboxWarmPools(v.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("kubernetes: pool %s: %w", name, err)
		}
		n, err := v.poolReady(ctx, name)
		if err != nil {
			return err
		}
		if n >= int(p.Spec.Replicas) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubernetes: pool %s: %d of %d ready: %w", name, n, p.Spec.Replicas, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// poolReady counts the ready pods of the pool named name.
func (v *Vendor) poolReady(ctx context.Context, name string) (int, error) {
	l, err := v.core.CoreV1().Pods(v.ns).List(ctx, metav1.ListOptions{LabelSelector: poolPodLabel})
	if err != nil {
		return 0, fmt.Errorf("kubernetes: pool %s: pods: %w", name, err)
	}
	n := 0
	for i := range l.Items {
		ref := metav1.GetControllerOf(&l.Items[i])
		if ref != nil && ref.Kind == "SandboxWarmPool" && ref.Name == name && podReady(&l.Items[i]) {
			n++
		}
	}
	return n, nil
}

// poolPodLabel is the label of every idle pod of a warm pool, which a
// claim removes.
const poolPodLabel = "agents.x-k8s.io/pool"

// DeletePool deletes the pool, the template and the standby Secret named
// after name, and the pool's idle pods with them; boxes claimed from it
// live on.
func (v *Vendor) DeletePool(ctx context.Context, name string) error {
	bg := metav1.DeletePropagationBackground
	ext := v.ext.ExtensionsV1alpha1()
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
	return len(spec.Env) == 0 && spec.Resources == (vendors.Resources{}) && spec.Runtime == "" && spec.Retention == 0
}

// Pools lists the warm pools boxctl made in the vendor's namespace, by
// name, with their status.
func (v *Vendor) Pools(ctx context.Context) ([]vendors.PoolSummary, error) {
	l, err := v.ext.ExtensionsV1alpha1().SandboxWarmPools(v.ns).List(ctx, metav1.ListOptions{LabelSelector: boxmeta.LabelManaged + "=true"})
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

// idlePods lists the unclaimed pods of pool name, oldest first.
func (v *Vendor) idlePods(ctx context.Context, name string) ([]corev1.Pod, error) {
	l, err := v.core.CoreV1().Pods(v.ns).List(ctx, metav1.ListOptions{LabelSelector: poolPodLabel})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: pool %s: pods: %w", name, err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		ref := metav1.GetControllerOf(&p)
		if ref != nil && ref.Kind == "SandboxWarmPool" && ref.Name == name && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out, nil
}

// PoolState reads the pool named name.
func (v *Vendor) PoolState(ctx context.Context, name string) (vendors.PoolStatus, error) {
	p, err := v.ext.ExtensionsV1alpha1().SandboxWarmPools(v.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return vendors.PoolStatus{}, fmt.Errorf("kubernetes: pool %s: %w", name, v.mapErr(err, name))
	}
	pods, err := v.idlePods(ctx, name)
	if err != nil {
		return vendors.PoolStatus{}, err
	}
	st := vendors.PoolStatus{Want: int(p.Spec.Replicas), Idle: len(pods)}
	for i := range pods {
		if podReady(&pods[i]) {
			st.Ready++
		}
	}
	if len(pods) > 0 {
		st.Oldest = pods[0].CreationTimestamp.Time
	}
	return st, nil
}

// RecyclePool deletes the idle pods of pool name made more than maxAge
// ago, oldest first and at most a quarter of the pool (at least one) per
// call, so most of its ready pods stay while the controller makes their
// replacements; it returns how many it deleted. A pod a claim adopts
// meanwhile is not deleted: each delete is conditional on the pod being
// as it was listed.
func (v *Vendor) RecyclePool(ctx context.Context, name string, maxAge time.Duration) (int, error) {
	pods, err := v.idlePods(ctx, name)
	if err != nil {
		return 0, err
	}
	limit := max(1, (len(pods)+3)/4)
	n := 0
	var errs []error
	for i := range pods {
		p := &pods[i]
		if n == limit || time.Since(p.CreationTimestamp.Time) <= maxAge {
			break
		}
		err := v.core.CoreV1().Pods(v.ns).Delete(ctx, p.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion}})
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
		v.o.logger.Debug("kubernetes pool recycled", "pool", name, "pods", n, "max_age", maxAge)
	}
	return n, nil
}
