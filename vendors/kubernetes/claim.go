package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

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
	t, err := v.ext.ExtensionsV1beta1().SandboxTemplates(v.ns).Get(ctx, pool, metav1.GetOptions{})
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

// claimPool makes a SandboxClaim on the warm pool named pool and returns
// the box once its Sandbox is Ready. The controller adopts an idle
// Sandbox of the pool when there is one (named after the pool, its pod
// after it) and makes one from the pool's template, named after the
// claim, when there is none; the box is that Sandbox. The Sandbox gets the
// box's labels and the claim's shutdown time, which end both. With
// standby, a ready pod makes the box ready (the Sandbox's Ready condition
// of its new generation, which follows, is not waited for), and a
// port-forward connection to each of the box's ports is dialed meanwhile,
// for the caller's first request.
//
// An adoption is the controller's conditional write of the Sandbox's
// owner: two claims made at once never get one Sandbox.
func (v *Vendor) claimPool(ctx context.Context, pool string, meta metav1.ObjectMeta, shutdown metav1.Time, standby bool) (*Box, error) {
	c := &extv1.SandboxClaim{ObjectMeta: meta, Spec: extv1.SandboxClaimSpec{
		WarmPoolRef: extv1.SandboxWarmPoolRef{Name: pool},
		Lifecycle:   &extv1.Lifecycle{ShutdownTime: &shutdown, ShutdownPolicy: extv1.ShutdownPolicyDelete},
	}}
	made, err := v.ext.ExtensionsV1beta1().SandboxClaims(v.ns).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		if derr := v.deleteByName(context.WithoutCancel(ctx), meta.Name); derr != nil {
			return nil, &vendors.CleanupError{Vendor: Name, BoxID: meta.Name, Err: errors.Join(fmt.Errorf("kubernetes: claim a box of pool %s: %w", pool, err), derr)}
		}
		return nil, fmt.Errorf("kubernetes: claim a box of pool %s: %w", pool, v.mapErr(err, ""))
	}
	// Until its Sandbox is known, the box is its claim (Destroy deletes
	// the claim of a box whose Sandbox is not there).
	b := v.box(meta.Name, meta.Name)
	sb, err := v.waitSandbox(ctx, made)
	if err != nil {
		return nil, v.failCreate(ctx, b, err)
	}
	b = v.box(sb.Name, podName(sb))
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
	// The controller makes or adopts the Sandbox bare: give it the box's
	// labels so that List and gc find it like any other, and the claim's
	// end.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": meta.Labels, "annotations": meta.Annotations},
		"spec":     map[string]any{"shutdownTime": shutdown, "shutdownPolicy": agentsv1.ShutdownPolicyDelete},
	})
	if err == nil {
		_, err = v.agents.AgentsV1beta1().Sandboxes(v.ns).Patch(ctx, sb.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return nil, v.failCreate(ctx, b, fmt.Errorf("kubernetes: label claimed box %s: %w", sb.Name, err))
	}
	ready := false
	if standby {
		pod, err := v.core.CoreV1().Pods(v.ns).Get(ctx, b.pod, metav1.GetOptions{})
		ready = err == nil && podReady(pod)
	}
	if !ready {
		if err := b.waitReady(ctx); err != nil {
			return nil, v.failCreate(ctx, b, err)
		}
	}
	v.o.logger.Debug("kubernetes box claimed", "id", b.id, "claim", meta.Name, "pod", b.pod, "pool", pool,
		"launch", sb.Labels[agentsv1.SandboxLaunchTypeLabel])
	return b, nil
}

// waitSandbox waits for the Sandbox the claim c gets (adopted or made,
// both labelled with the claim's UID), failing with the claim's reason
// when the controller cannot give it one.
func (v *Vendor) waitSandbox(ctx context.Context, c *extv1.SandboxClaim) (*agentsv1.Sandbox, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, v.o.readyTimeout, fmt.Errorf("no sandbox within %v", v.o.readyTimeout))
	defer cancel()
	name := c.Name
	sbs := v.agents.AgentsV1beta1().Sandboxes(v.ns)
	claims := v.ext.ExtensionsV1beta1().SandboxClaims(v.ns)
	bySandbox := metav1.ListOptions{LabelSelector: extv1.SandboxIDLabel + "=" + string(c.UID)}
	byName := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	last := NotReadyError{ID: name}
	fail := func(err error) error { e := last; e.Err = err; return &e }
	// claimed notes the claim's state: an error when it can no longer
	// get a Sandbox.
	claimed := func(c *extv1.SandboxClaim) error {
		for _, cond := range c.Status.Conditions {
			if cond.Type == string(agentsv1.SandboxConditionReady) && cond.Status != metav1.ConditionTrue {
				last.Reason, last.Message = cond.Reason, cond.Message
				if slices.Contains(claimRefused, cond.Reason) {
					return &NotReadyError{ID: name, Reason: cond.Reason, Message: cond.Message}
				}
			}
		}
		return nil
	}
	for {
		l, err := sbs.List(ctx, bySandbox)
		if err != nil {
			return nil, fail(err)
		}
		for i := range l.Items {
			if l.Items[i].DeletionTimestamp == nil {
				return &l.Items[i], nil
			}
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
		sw, err := sbs.Watch(ctx, metav1.ListOptions{LabelSelector: bySandbox.LabelSelector, ResourceVersion: l.ResourceVersion})
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
					if sb, ok := ev.Object.(*agentsv1.Sandbox); ok && ev.Type != watch.Deleted && sb.DeletionTimestamp == nil {
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

// claimRefused are the reasons of a claim's Ready condition that the
// controller does not retry past: the claim can get no Sandbox.
var claimRefused = []string{"TemplateNotFound", "WarmPoolNotFound", "InvalidMetadata", "EnvVarsInjectionRejected"}

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
	err := v.ext.ExtensionsV1beta1().SandboxClaims(v.ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("claim: %w", err)
	}
	return nil
}
