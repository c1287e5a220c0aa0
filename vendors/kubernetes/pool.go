package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1alpha1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// PoolSpec is a warm pool of boxes: a SandboxTemplate and a
// SandboxWarmPool of the same name that keeps Replicas pods of it running,
// for Create to claim (WithWarmPool).
type PoolSpec struct {
	// Name names the template and the pool.
	Name string
	// Image is the box image of the pool's pods.
	Image string
	// Replicas is how many idle boxes the pool keeps ready.
	Replicas int32
	// Resources are the boxes' limits; zero fields mean the vendor's
	// defaults.
	Resources vendors.Resources
	// Standby, when set, makes the pool's pods run the standby bridge
	// from their start, for ClaimStandby; its Secret is the pool's
	// (StandbySecret), made with a random pool token when missing. Create
	// claims only from a pool without it.
	Standby *StandbySpec
}

// EnsurePool creates or updates the template and the warm pool of spec
// (and a standby pool's Secret). A pool's pods run until claimed (their
// init's lifetime is the longest a box may have); a claimed box ends at
// its claim's shutdown time.
func (v *Vendor) EnsurePool(ctx context.Context, spec PoolSpec) error {
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
		st := *s
		st.Secret = StandbySecret(spec.Name)
		podSpec = standbyPodSpec(podSpec, st)
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

// claimable reports whether a warm box can serve spec: it asks for nothing
// a pool's pod was not started with.
func claimable(spec vendors.CreateSpec) bool {
	return len(spec.Env) == 0 && spec.Resources == (vendors.Resources{}) && spec.Runtime == "" && spec.Retention == 0
}

// poolTemplate is what a create needs of the vendor's pool template.
type poolTemplate struct {
	image string
	// harness is a standby pool's ("" for a plain pool).
	harness string
}

// poolTemplate reads the vendor's pool template (zero when it is
// missing). It is read at each create: another process may change the
// pool.
func (v *Vendor) poolTemplate(ctx context.Context) (poolTemplate, error) {
	t, err := v.ext.ExtensionsV1alpha1().SandboxTemplates(v.ns).Get(ctx, v.o.pool, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return poolTemplate{}, nil
	}
	if err != nil {
		return poolTemplate{}, fmt.Errorf("kubernetes: pool template %s: %w", v.o.pool, err)
	}
	out := poolTemplate{harness: t.Annotations[HarnessAnnotation]}
	for _, c := range t.Spec.PodTemplate.Spec.Containers {
		if c.Name == ContainerName {
			out.image = c.Image
		}
	}
	return out, nil
}

// claim makes a SandboxClaim on the vendor's pool for spec, when the
// pool's template is a plain one with spec's image (ok false otherwise:
// make a Sandbox), and returns the box once its Sandbox is Ready.
func (v *Vendor) claim(ctx context.Context, spec vendors.CreateSpec, meta metav1.ObjectMeta, shutdown metav1.Time) (vendors.Box, bool, error) {
	t, err := v.poolTemplate(ctx)
	if err != nil || t.image != spec.Image || t.harness != "" {
		return nil, false, err
	}
	b, err := v.claimPool(ctx, meta, shutdown, false)
	if err != nil {
		return nil, true, err
	}
	return b, true, nil
}

// claimAttempts bounds the claims one create makes when the pods it
// adopts turn out to be another claim's.
const claimAttempts = 3

// errLostPod is an adopted pod that another claim adopted too.
var errLostPod = errors.New("the adopted pod is another claim's")

// claimPool makes a SandboxClaim on the vendor's pool and returns the box
// once its Sandbox is Ready. The controller names the Sandbox after the
// claim and adopts an idle pod of the pool when there is one; the
// Sandbox gets the box's labels and the claim's shutdown time, which end
// both. With standby, an adopted pod that is ready makes the box ready
// (the Sandbox's Ready condition, which follows, is not waited for), and
// a port-forward connection to each of the box's ports is dialed
// meanwhile, for the caller's first request.
//
// agent-sandbox (v0.2.1) may adopt one idle pod for two claims made at
// once: a pod it adopted has no controller until the Sandbox controller
// gives it one, and so stays a candidate. The claim the pod names makes
// it its own (ownPod); one that lost it gives its claim and Sandbox up,
// the pod left to the other, and claims anew.
func (v *Vendor) claimPool(ctx context.Context, meta metav1.ObjectMeta, shutdown metav1.Time, standby bool) (*Box, error) {
	for i := 1; ; i++ {
		b, err := v.claimOnce(ctx, meta, shutdown, standby)
		if !errors.Is(err, errLostPod) || i == claimAttempts {
			return b, err
		}
		v.o.logger.Debug("kubernetes claim lost its pod to another claim", "id", meta.Name, "attempt", i)
		meta.Name = boxName(meta.Labels[boxmeta.LabelRunTag])
	}
}

func (v *Vendor) claimOnce(ctx context.Context, meta metav1.ObjectMeta, shutdown metav1.Time, standby bool) (*Box, error) {
	c := &extv1.SandboxClaim{ObjectMeta: meta, Spec: extv1.SandboxClaimSpec{
		TemplateRef: extv1.SandboxTemplateRef{Name: v.o.pool},
		Lifecycle:   &extv1.Lifecycle{ShutdownTime: &shutdown, ShutdownPolicy: extv1.ShutdownPolicyDelete},
	}}
	claims := v.ext.ExtensionsV1alpha1().SandboxClaims(v.ns)
	made, err := claims.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		if derr := v.deleteByName(context.WithoutCancel(ctx), meta.Name); derr != nil {
			return nil, &vendors.CleanupError{Vendor: Name, BoxID: meta.Name, Err: errors.Join(fmt.Errorf("kubernetes: claim a box of pool %s: %w", v.o.pool, err), derr)}
		}
		return nil, fmt.Errorf("kubernetes: claim a box of pool %s: %w", v.o.pool, v.mapErr(err, ""))
	}
	b := v.box(meta.Name, meta.Name)
	sb, err := v.waitSandbox(ctx, meta.Name)
	if err != nil {
		return nil, v.failCreate(ctx, b, err)
	}
	b.pod = podName(sb)
	ports, err := boxmeta.ParsePorts(meta.Labels[boxmeta.LabelPorts])
	if err != nil {
		return nil, v.failCreate(ctx, b, err)
	}
	b.ports = ports
	if standby {
		for _, port := range ports {
			if f, err := v.forward(b, port); err == nil {
				f.prime()
			}
		}
	}
	// The controller makes the Sandbox bare: give it the box's labels so
	// that List and gc find it like any other, and the claim's end.
	patched := make(chan error, 1)
	go func() {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"labels": meta.Labels, "annotations": meta.Annotations},
			"spec":     map[string]any{"shutdownTime": shutdown, "shutdownPolicy": agentsv1.ShutdownPolicyDelete},
		})
		if err == nil {
			_, err = v.agents.AgentsV1alpha1().Sandboxes(v.ns).Patch(ctx, meta.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		patched <- err
	}()
	ready := false
	if b.pod != b.id {
		ready, err = v.ownPod(ctx, b, sb, made.UID)
	}
	if perr := <-patched; err == nil && perr != nil {
		err = fmt.Errorf("kubernetes: label claimed box %s: %w", meta.Name, perr)
	}
	if errors.Is(err, errLostPod) {
		if rerr := v.release(context.WithoutCancel(ctx), b); rerr != nil {
			return nil, &vendors.CleanupError{Vendor: Name, BoxID: b.id, Err: errors.Join(err, rerr)}
		}
		return nil, err
	}
	if err != nil {
		return nil, v.failCreate(ctx, b, err)
	}
	if !standby || !ready {
		if err := b.waitReady(ctx); err != nil {
			return nil, v.failCreate(ctx, b, err)
		}
	}
	v.o.logger.Debug("kubernetes box claimed", "id", meta.Name, "pod", b.pod, "pool", v.o.pool)
	return b, nil
}

// ownPod makes the pod the Sandbox sb adopted for the claim uid the
// Sandbox's own, unless another claim adopted it after (errLostPod). The
// claim that adopted a pod last is the one it names, and it keeps the
// pod: in one JSON patch, applied only while the pod still names the
// claim, its Sandbox becomes the pod's controller in place of any other,
// after which no claim adopts the pod any more. It reports whether the
// pod is ready.
func (v *Vendor) ownPod(ctx context.Context, b *Box, sb *agentsv1.Sandbox, uid types.UID) (bool, error) {
	own := metav1.NewControllerRef(sb, agentsv1.GroupVersion.WithKind("Sandbox"))
	// Blocking the owner's deletion would need the right to set the
	// Sandbox's finalizers.
	own.BlockOwnerDeletion = nil
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/labels/" + strings.ReplaceAll(extv1.SandboxIDLabel, "/", "~1"), "value": string(uid)},
		{"op": "add", "path": "/metadata/ownerReferences", "value": []metav1.OwnerReference{*own}},
	})
	if err != nil {
		return false, err
	}
	pods := v.core.CoreV1().Pods(v.ns)
	pod, err := pods.Patch(ctx, b.pod, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err == nil {
		return podReady(pod), nil
	}
	// A failed test is an error like any other: the pod tells which.
	if cur, gerr := pods.Get(ctx, b.pod, metav1.GetOptions{}); gerr == nil && cur.Labels[extv1.SandboxIDLabel] != string(uid) {
		return false, errLostPod
	}
	return false, fmt.Errorf("kubernetes: adopted pod %s: %w", b.pod, err)
}

// release gives up a claimed box whose pod is another claim's: its claim
// and Sandbox go, orphaning what they own (the claim's deletion would
// otherwise take the Sandbox, and the Sandbox's the pod).
func (v *Vendor) release(ctx context.Context, b *Box) error {
	v.stopForwards(b.id)
	orphan := metav1.DeletePropagationOrphan
	var errs []error
	if err := v.ext.ExtensionsV1alpha1().SandboxClaims(v.ns).Delete(ctx, b.id, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("claim: %w", err))
	}
	if err := v.agents.AgentsV1alpha1().Sandboxes(v.ns).Delete(ctx, b.id, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("sandbox: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kubernetes: release box %s: %w", b.id, err)
	}
	return nil
}

// waitSandbox waits for the Sandbox a claim makes, failing with the
// claim's reason when the controller cannot make it.
func (v *Vendor) waitSandbox(ctx context.Context, name string) (*agentsv1.Sandbox, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, v.o.readyTimeout, fmt.Errorf("no sandbox within %v", v.o.readyTimeout))
	defer cancel()
	sbs := v.agents.AgentsV1alpha1().Sandboxes(v.ns)
	claims := v.ext.ExtensionsV1alpha1().SandboxClaims(v.ns)
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	last := NotReadyError{ID: name}
	fail := func(err error) error { e := last; e.Err = err; return &e }
	// claimed notes the claim's state: an error when it can no longer
	// get a Sandbox.
	claimed := func(c *extv1.SandboxClaim) error {
		for _, cond := range c.Status.Conditions {
			if cond.Type == string(agentsv1.SandboxConditionReady) && cond.Status != metav1.ConditionTrue {
				last.Reason, last.Message = cond.Reason, cond.Message
				if cond.Reason == "TemplateNotFound" {
					return &NotReadyError{ID: name, Reason: cond.Reason, Message: cond.Message}
				}
			}
		}
		return nil
	}
	for {
		l, err := sbs.List(ctx, byName)
		if err != nil {
			return nil, fail(err)
		}
		if len(l.Items) > 0 {
			return &l.Items[0], nil
		}
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, &NotReadyError{ID: name, Reason: "Deleted", Message: "the claim was deleted while starting"}
		}
		if err != nil {
			return nil, fail(err)
		}
		if err := claimed(c); err != nil {
			return nil, err
		}
		sw, err := sbs.Watch(ctx, metav1.ListOptions{FieldSelector: byName.FieldSelector, ResourceVersion: l.ResourceVersion})
		if err != nil {
			return nil, fail(err)
		}
		cw, err := claims.Watch(ctx, metav1.ListOptions{FieldSelector: byName.FieldSelector, ResourceVersion: c.ResourceVersion})
		if err != nil {
			sw.Stop()
			return nil, fail(err)
		}
		sb, done, err := func() (*agentsv1.Sandbox, bool, error) {
			defer sw.Stop()
			defer cw.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil, true, fail(context.Cause(ctx))
				case ev, ok := <-sw.ResultChan():
					if !ok || ev.Type == watch.Error {
						return nil, false, nil
					}
					if sb, ok := ev.Object.(*agentsv1.Sandbox); ok && ev.Type != watch.Deleted {
						return sb, true, nil
					}
				case ev, ok := <-cw.ResultChan():
					if !ok || ev.Type == watch.Error {
						return nil, false, nil
					}
					if ev.Type == watch.Deleted {
						return nil, true, &NotReadyError{ID: name, Reason: "Deleted", Message: "the claim was deleted while starting"}
					}
					if c, ok := ev.Object.(*extv1.SandboxClaim); ok {
						if err := claimed(c); err != nil {
							return nil, true, err
						}
					}
				}
			}
		}()
		if done {
			return sb, err
		}
	}
}

// podReady reports whether pod runs and is ready.
func podReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteClaim deletes a claim; one already gone is not an error.
func (v *Vendor) deleteClaim(ctx context.Context, name string) error {
	bg := metav1.DeletePropagationBackground
	err := v.ext.ExtensionsV1alpha1().SandboxClaims(v.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("claim: %w", err)
	}
	return nil
}

// PoolStatus is what a warm pool holds now.
type PoolStatus struct {
	// Want is the pool's replicas; Idle its unclaimed pods, Ready those
	// of them that are ready.
	Want  int `json:"want"`
	Idle  int `json:"idle"`
	Ready int `json:"ready"`
	// Oldest is when the oldest idle pod was made (zero: none).
	Oldest time.Time `json:"oldest,omitzero"`
}

// OldestAge is the age of the oldest idle pod, to the second; "-" for
// none.
func (s PoolStatus) OldestAge() string {
	if s.Oldest.IsZero() {
		return "-"
	}
	return time.Since(s.Oldest).Round(time.Second).String()
}

// WritePools writes one line per pool.
func WritePools(w io.Writer, rows []PoolSummary) error {
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%s\tready %d of %d\tidle %d\toldest %s\n", r.Name, r.Ready, r.Want, r.Idle, r.OldestAge()); err != nil {
			return err
		}
	}
	return nil
}

// PoolSummary is a warm pool boxctl made, with its status.
type PoolSummary struct {
	Name string `json:"name"`
	PoolStatus
}

// Pools lists the warm pools boxctl made in the vendor's namespace, by
// name, with their status.
func (v *Vendor) Pools(ctx context.Context) ([]PoolSummary, error) {
	l, err := v.ext.ExtensionsV1alpha1().SandboxWarmPools(v.ns).List(ctx, metav1.ListOptions{LabelSelector: boxmeta.LabelManaged + "=true"})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pools: %w", v.mapErr(err, ""))
	}
	out := []PoolSummary{}
	for _, p := range l.Items {
		st, err := v.PoolState(ctx, p.Name)
		if errors.Is(err, vendors.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, PoolSummary{Name: p.Name, PoolStatus: st})
	}
	slices.SortFunc(out, func(a, b PoolSummary) int { return strings.Compare(a.Name, b.Name) })
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
func (v *Vendor) PoolState(ctx context.Context, name string) (PoolStatus, error) {
	p, err := v.ext.ExtensionsV1alpha1().SandboxWarmPools(v.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return PoolStatus{}, fmt.Errorf("kubernetes: pool %s: %w", name, v.mapErr(err, name))
	}
	pods, err := v.idlePods(ctx, name)
	if err != nil {
		return PoolStatus{}, err
	}
	st := PoolStatus{Want: int(p.Spec.Replicas), Idle: len(pods)}
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

// KeepPool keeps the pool named name until ctx ends: each second it reads
// the pool's state for report (with how many pods it recycled so far),
// and every tenth of maxAge (at least each second) it recycles the pods
// older than maxAge (RecyclePool). A failed call is logged and tried
// again at the next tick, so a passing API error does not end the
// keeper; a pool that is gone does. The pool itself stays: DeletePool
// removes it.
func (v *Vendor) KeepPool(ctx context.Context, name string, maxAge time.Duration, report func(st PoolStatus, recycled int)) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	every := max(maxAge/10, time.Second)
	last := time.Now()
	recycled := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if time.Since(last) >= every {
			n, err := v.RecyclePool(ctx, name, maxAge)
			if err != nil && ctx.Err() == nil {
				v.o.logger.Warn("kubernetes pool: recycle failed, again at the next tick", "pool", name, "err", err)
			} else {
				last = time.Now()
			}
			recycled += n
		}
		st, err := v.PoolState(ctx, name)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, vendors.ErrNotFound):
			return err
		case err != nil:
			v.o.logger.Warn("kubernetes pool: state not read, again at the next tick", "pool", name, "err", err)
		case report != nil:
			report(st, recycled)
		}
	}
}
