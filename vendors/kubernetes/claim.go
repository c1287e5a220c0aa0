package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1alpha1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1alpha1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// poolTemplate is what a create needs of the vendor's pool template.
type poolTemplate struct {
	image string
	// harness is a standby pool's ("" for a plain pool).
	harness string
}

// poolTemplate reads the vendor's pool template (zero when it is
// missing). It is read at each create: another process may change the
// pool.
func (v *Vendor) poolTemplate(ctx context.Context, pool string) (poolTemplate, error) {
	t, err := v.ext.ExtensionsV1alpha1().SandboxTemplates(v.ns).Get(ctx, pool, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return poolTemplate{}, nil
	}
	if err != nil {
		return poolTemplate{}, fmt.Errorf("kubernetes: pool template %s: %w", pool, err)
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
func (v *Vendor) claim(ctx context.Context, pool string, spec vendors.CreateSpec, meta metav1.ObjectMeta, shutdown metav1.Time) (vendors.Box, bool, error) {
	t, err := v.poolTemplate(ctx, pool)
	if err != nil || t.image != spec.Image || t.harness != "" {
		return nil, false, err
	}
	b, err := v.claimPool(ctx, pool, meta, shutdown, false)
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
func (v *Vendor) claimPool(ctx context.Context, pool string, meta metav1.ObjectMeta, shutdown metav1.Time, standby bool) (*Box, error) {
	for i := 1; ; i++ {
		b, err := v.claimOnce(ctx, pool, meta, shutdown, standby)
		if !errors.Is(err, errLostPod) || i == claimAttempts {
			return b, err
		}
		v.o.logger.Debug("kubernetes claim lost its pod to another claim", "id", meta.Name, "attempt", i)
		meta.Name = boxName(meta.Labels[boxmeta.LabelRunTag])
	}
}

func (v *Vendor) claimOnce(ctx context.Context, pool string, meta metav1.ObjectMeta, shutdown metav1.Time, standby bool) (*Box, error) {
	c := &extv1.SandboxClaim{ObjectMeta: meta, Spec: extv1.SandboxClaimSpec{
		TemplateRef: extv1.SandboxTemplateRef{Name: pool},
		Lifecycle:   &extv1.Lifecycle{ShutdownTime: &shutdown, ShutdownPolicy: extv1.ShutdownPolicyDelete},
	}}
	claims := v.ext.ExtensionsV1alpha1().SandboxClaims(v.ns)
	made, err := claims.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		if derr := v.deleteByName(context.WithoutCancel(ctx), meta.Name); derr != nil {
			return nil, &vendors.CleanupError{Vendor: Name, BoxID: meta.Name, Err: errors.Join(fmt.Errorf("kubernetes: claim a box of pool %s: %w", pool, err), derr)}
		}
		return nil, fmt.Errorf("kubernetes: claim a box of pool %s: %w", pool, v.mapErr(err, ""))
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
	v.o.logger.Debug("kubernetes box claimed", "id", meta.Name, "pod", b.pod, "pool", pool)
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
