package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// A suspendable box (CreateSpec.Retention) is a Sandbox with a volume
// claim (DiskVolume) of the vendor's StorageClass that holds what a
// suspend keeps: the image user's home (the bridge's store, the
// harnesses' session files) and the workspace, mounted over KeptPaths.
// An init container seeds the volume from the image at the box's first
// start. Suspend is agent-sandbox's: operating mode Suspended, which
// deletes the pod and keeps the claim; Resume sets it Running and waits
// for the new pod.
//
// The box's lifetimes live in the Sandbox's LifetimeAnnotation, which the
// box cannot change (its pod has no service account token): the active
// deadline while it runs, what is left of it and the retention while it
// is suspended. shutdownTime follows them: the active deadline while the
// box runs, the end of its retention while it is suspended, so the
// controller removes an expired box, its claim and its volume by itself.
const (
	// LifetimeAnnotation is a suspendable box's lifetime record (JSON).
	LifetimeAnnotation = boxmeta.LabelPrefix + "lifetime"
	// DiskVolume is the name of a suspendable box's volume claim template
	// (its claim is DiskVolume-<box id>).
	DiskVolume = "box-disk"
	// DefaultDiskSize is the size of a suspendable box's volume when its
	// spec asks for no disk.
	DefaultDiskSize = 10 << 30
	// seedMount is where the seeding init container sees the volume.
	seedMount = "/mnt/box-disk"
)

// KeptPaths are the directories of a box image that a suspendable box
// keeps on its volume, each under the volume's subdirectory of the same
// key: the home of boxctl images' user and the workspace.
var KeptPaths = []struct{ Sub, Path string }{{"home", "/home/box"}, {"workspace", "/workspace"}}

// seedScript copies the image's kept paths onto an empty volume, once.
var seedScript = func() string {
	s := `set -eu; d=` + seedMount + `; [ ! -e "$d/.seeded" ] || exit 0`
	for _, k := range KeptPaths {
		s += fmt.Sprintf(`; mkdir -p "$d/%s"; cp -a %s/. "$d/%s/"`, k.Sub, k.Path, k.Sub)
	}
	return s + `; touch "$d/.seeded"`
}()

var _ vendors.Suspender = (*Vendor)(nil)

// WithStorageClass names the StorageClass of suspendable boxes' volumes.
// Default: the cluster's default class. A fork clones a box's volume
// (a claim with the source claim as its dataSource), which needs a class
// that binds at once and can clone.
func WithStorageClass(name string) Option { return func(o *options) { o.storageClass = name } }

// lifetime is a suspendable box's LifetimeAnnotation.
type lifetime struct {
	Suspended bool `json:"suspended,omitempty"`
	// Deadline is the active deadline while the box runs.
	Deadline time.Time `json:"deadline,omitzero"`
	// BudgetMS, SuspendedAt and RetainUntil are a suspended box's.
	BudgetMS    int64     `json:"budgetMs,omitempty"`
	SuspendedAt time.Time `json:"suspendedAt,omitzero"`
	RetainUntil time.Time `json:"retainUntil,omitzero"`
}

func (l lifetime) budget() time.Duration { return time.Duration(l.BudgetMS) * time.Millisecond }

func readLifetime(sb *agentsv1.Sandbox) (lifetime, bool) {
	raw, ok := sb.Annotations[LifetimeAnnotation]
	if !ok {
		return lifetime{}, false
	}
	var l lifetime
	return l, json.Unmarshal([]byte(raw), &l) == nil
}

// setLifetime records l in sb: the annotation, shutdownTime, and the
// deadline the box's init enforces at its next start.
func setLifetime(sb *agentsv1.Sandbox, l lifetime) {
	raw, _ := json.Marshal(l)
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations[LifetimeAnnotation] = string(raw)
	end := l.Deadline
	if l.Suspended {
		end = l.RetainUntil
	}
	st := metav1.NewTime(end)
	sb.Spec.ShutdownTime = &st
	if !l.Suspended {
		for i := range sb.Spec.PodTemplate.Spec.Containers {
			c := &sb.Spec.PodTemplate.Spec.Containers[i]
			for j := range c.Env {
				if c.Env[j].Name == boxmeta.EnvDeadline {
					c.Env[j].Value = boxmeta.FormatDeadline(l.Deadline)
				}
			}
		}
	}
}

// suspendable adds to a new Sandbox what a suspend needs: the retention
// label, the lifetime record, the volume claim, its mounts and the init
// container that seeds it.
func (v *Vendor) suspendable(spec vendors.CreateSpec, all map[string]string, sb *agentsv1.Sandbox, now time.Time) {
	size := int64(DefaultDiskSize)
	if spec.Resources.DiskBytes > 0 {
		size = spec.Resources.DiskBytes
	}
	claim := agentsv1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: agentsv1.EmbeddedObjectMetadata{Name: DiskVolume},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	if v.o.storageClass != "" {
		claim.Spec.StorageClassName = new(v.o.storageClass)
	}
	sb.Spec.VolumeClaimTemplates = []agentsv1.PersistentVolumeClaimTemplate{claim}
	ps := &sb.Spec.PodTemplate.Spec
	box := &ps.Containers[0]
	for _, k := range KeptPaths {
		box.VolumeMounts = append(box.VolumeMounts, corev1.VolumeMount{Name: DiskVolume, MountPath: k.Path, SubPath: k.Sub})
	}
	ps.InitContainers = []corev1.Container{{
		Name:            "seed",
		Image:           box.Image,
		ImagePullPolicy: box.ImagePullPolicy,
		Command:         []string{"/bin/sh", "-c", seedScript},
		Resources:       box.Resources,
		SecurityContext: box.SecurityContext.DeepCopy(),
		VolumeMounts:    []corev1.VolumeMount{{Name: DiskVolume, MountPath: seedMount}},
	}}
	// A class that honours fsGroup gives the image's group the volume.
	ps.SecurityContext.FSGroup = new(int64(boxGID))
	ps.SecurityContext.FSGroupChangePolicy = new(corev1.FSGroupChangeOnRootMismatch)
	all[boxmeta.LabelRetention] = strconv.FormatInt(int64(spec.Retention/time.Second), 10)
	setLifetime(sb, lifetime{Deadline: now.Add(spec.Lifetime)})
}

// boxGID is the group of boxctl images' user.
const boxGID = 10001

// suspendTarget reads a suspendable box's Sandbox and lifetime, or fails
// with why it is not one.
func (v *Vendor) suspendTarget(ctx context.Context, op, id string) (*agentsv1.Sandbox, lifetime, time.Duration, error) {
	if err := v.checkAPI(ctx, groupAgents); err != nil {
		return nil, lifetime{}, 0, err
	}
	sb, err := v.agents.AgentsV1beta1().Sandboxes(v.ns).Get(ctx, id, metav1.GetOptions{})
	if err == nil && (sb.DeletionTimestamp != nil || boxLabels(sb.ObjectMeta)[boxmeta.LabelManaged] != "true") {
		err = apierrors.NewNotFound(agentsv1.Resource("sandboxes"), id)
	}
	if err != nil {
		return nil, lifetime{}, 0, fmt.Errorf("kubernetes: %s: %w", op, v.mapErr(err, id))
	}
	secs, err := strconv.ParseInt(boxLabels(sb.ObjectMeta)[boxmeta.LabelRetention], 10, 64)
	l, ok := readLifetime(sb)
	if err != nil || secs <= 0 || !ok || len(sb.Spec.VolumeClaimTemplates) == 0 {
		return nil, lifetime{}, 0, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "it was made without a retention"}
	}
	return sb, l, time.Duration(secs) * time.Second, nil
}

// updateSandbox applies edit to the latest Sandbox id and writes it,
// again on a conflict.
func (v *Vendor) updateSandbox(ctx context.Context, id string, edit func(*agentsv1.Sandbox) error) error {
	sbs := v.agents.AgentsV1beta1().Sandboxes(v.ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sb, err := sbs.Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := edit(sb); err != nil {
			return err
		}
		_, err = sbs.Update(ctx, sb, metav1.UpdateOptions{})
		return err
	})
}

// suspended reports whether sb's operating mode is Suspended (its pod
// gone or going, its volumes kept).
func suspended(sb *agentsv1.Sandbox) bool {
	return sb.Spec.OperatingMode == agentsv1.SandboxOperatingModeSuspended
}

// Suspend sets the Sandbox's operating mode to Suspended, which deletes
// its pod and keeps its volume, and returns once the pod is gone. See
// vendors.Suspender.
func (v *Vendor) Suspend(ctx context.Context, id string) (vendors.SuspendInfo, error) {
	sb, l, retain, err := v.suspendTarget(ctx, "suspend", id)
	if err != nil {
		return vendors.SuspendInfo{}, err
	}
	if !l.Suspended {
		now := time.Now()
		left := l.Deadline.Sub(now)
		if left <= 0 || suspended(sb) {
			return vendors.SuspendInfo{}, &vendors.RetentionError{Vendor: Name, ID: id, Until: l.Deadline, Budget: true}
		}
		l = lifetime{Suspended: true, BudgetMS: left.Milliseconds(), SuspendedAt: now, RetainUntil: now.Add(retain)}
		v.stopForwards(id)
		err := v.updateSandbox(ctx, id, func(sb *agentsv1.Sandbox) error {
			sb.Spec.OperatingMode = agentsv1.SandboxOperatingModeSuspended
			setLifetime(sb, l)
			return nil
		})
		if err != nil {
			return vendors.SuspendInfo{}, fmt.Errorf("kubernetes: suspend box %s: %w", id, v.mapErr(err, id))
		}
	}
	if err := v.waitPodGone(ctx, podName(sb)); err != nil {
		return vendors.SuspendInfo{}, fmt.Errorf("kubernetes: suspend box %s: %w", id, err)
	}
	v.o.logger.Debug("kubernetes box suspended", "id", id, "budget_left", l.budget())
	return vendors.SuspendInfo{SuspendedAt: l.SuspendedAt, BudgetLeft: l.budget(), RetainUntil: l.RetainUntil}, nil
}

// waitPodGone polls until pod name no longer exists.
func (v *Vendor) waitPodGone(ctx context.Context, name string) error {
	bound := time.Duration(v.o.grace)*time.Second + time.Minute
	err := wait.PollUntilContextTimeout(ctx, pollEvery, bound, true, func(ctx context.Context) (bool, error) {
		_, err := v.core.CoreV1().Pods(v.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("pod %s still there after its grace period and a minute: %w", name, err)
	}
	return err
}

// pollEvery is how often a suspend, resume or fork reads what it waits for.
const pollEvery = 100 * time.Millisecond

// Resume sets the suspended Sandbox Running with what is left of its
// budget and returns the box once its new pod is Ready; a pod that does
// not get ready leaves the box suspended again. See
// vendors.Suspender.
func (v *Vendor) Resume(ctx context.Context, id string) (vendors.Box, error) {
	sb, l, _, err := v.suspendTarget(ctx, "resume", id)
	if err != nil {
		return nil, err
	}
	if !l.Suspended || !suspended(sb) {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "it is not suspended"}
	}
	now := time.Now()
	if now.After(l.RetainUntil) {
		return nil, &vendors.RetentionError{Vendor: Name, ID: id, Until: l.RetainUntil}
	}
	if l.budget() <= 0 {
		return nil, &vendors.RetentionError{Vendor: Name, ID: id, Until: l.SuspendedAt, Budget: true}
	}
	run := lifetime{Deadline: now.Add(l.budget())}
	err = v.updateSandbox(ctx, id, func(sb *agentsv1.Sandbox) error {
		if cur, _ := readLifetime(sb); !cur.Suspended {
			return &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "it is not suspended"}
		}
		sb.Spec.OperatingMode = agentsv1.SandboxOperatingModeRunning
		setLifetime(sb, run)
		return nil
	})
	if err != nil {
		if _, ok := errors.AsType[*vendors.NotSuspendableError](err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("kubernetes: resume box %s: %w", id, v.mapErr(err, id))
	}
	b := v.box(id, id)
	if err := b.waitReady(ctx); err != nil {
		// Put the record back, so the box stays resumable.
		l.SuspendedAt = time.Now()
		if rerr := v.updateSandbox(context.WithoutCancel(ctx), id, func(sb *agentsv1.Sandbox) error {
			sb.Spec.OperatingMode = agentsv1.SandboxOperatingModeSuspended
			setLifetime(sb, l)
			return nil
		}); rerr != nil {
			err = errors.Join(err, fmt.Errorf("suspend it again: %w", rerr))
		}
		return nil, fmt.Errorf("kubernetes: resume box %s: %w", id, err)
	}
	v.o.logger.Debug("kubernetes box resumed", "id", id, "deadline", run.Deadline)
	return b, nil
}

// forkBound bounds the wait for a fork's cloned volumes.
const forkBound = 5 * time.Minute

// Fork makes n suspended Sandboxes whose volume claims clone the suspended
// box's (the claim's dataSource), with its labels, pod and lifetime, and
// returns once every clone is bound. See vendors.Suspender.
func (v *Vendor) Fork(ctx context.Context, id string, n int) (_ []string, err error) {
	if n < 1 {
		return nil, fmt.Errorf("kubernetes: fork: want at least one box, not %d", n)
	}
	src, l, _, err := v.suspendTarget(ctx, "fork", id)
	if err != nil {
		return nil, err
	}
	if !l.Suspended || !suspended(src) {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "only a suspended box forks"}
	}
	srcClaim := DiskVolume + "-" + id
	if err := v.clonable(ctx, id, srcClaim); err != nil {
		return nil, err
	}
	begin := time.Now()
	all := boxLabels(src.ObjectMeta)
	all[boxmeta.LabelForkOf] = id
	delete(all, boxmeta.LabelCreate)
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			meta, merr := objectMeta(boxName(all[boxmeta.LabelRunTag]), all)
			if merr != nil {
				errs[i] = merr
				return
			}
			sb := &agentsv1.Sandbox{ObjectMeta: meta, Spec: *src.Spec.DeepCopy()}
			sb.Spec.PodTemplate.ObjectMeta.Labels = maps.Clone(meta.Labels)
			sb.Spec.OperatingMode = agentsv1.SandboxOperatingModeSuspended
			// A confined source's fork is confined by the same rules, from
			// its first pod on.
			if errs[i] = v.forkNetworkPolicy(ctx, id, sb); errs[i] != nil {
				return
			}
			for j := range sb.Spec.VolumeClaimTemplates {
				sb.Spec.VolumeClaimTemplates[j].Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: srcClaim}
			}
			setLifetime(sb, l)
			created, cerr := v.agents.AgentsV1beta1().Sandboxes(v.ns).Create(ctx, sb, metav1.CreateOptions{})
			if cerr != nil {
				if derr := v.deleteByName(context.WithoutCancel(ctx), meta.Name); derr != nil {
					errs[i] = &vendors.CleanupError{Vendor: Name, BoxID: meta.Name, Err: errors.Join(cerr, derr)}
					return
				}
				errs[i] = fmt.Errorf("kubernetes: fork box %s: %w", id, v.mapErr(cerr, ""))
				return
			}
			ids[i] = meta.Name
			if _, confined := sb.Spec.PodTemplate.ObjectMeta.Labels[LabelEgressBox]; confined {
				if errs[i] = v.ownNetworkPolicy(ctx, created); errs[i] != nil {
					return
				}
			}
			errs[i] = v.waitBound(ctx, DiskVolume+"-"+meta.Name)
		})
	}
	wg.Wait()
	var made []string
	for _, m := range ids {
		if m != "" {
			made = append(made, m)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, m := range made {
			if derr := v.deleteByName(context.WithoutCancel(ctx), m); derr != nil {
				return nil, &vendors.CleanupError{Vendor: Name, BoxID: m, Err: errors.Join(err, derr)}
			}
		}
		if _, ok := errors.AsType[*vendors.CleanupError](err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("kubernetes: fork box %s: %w", id, err)
	}
	v.o.logger.Debug("kubernetes box forked", "id", id, "forks", n, "took", time.Since(begin))
	return made, nil
}

// clonable checks that a box's claim can be cloned now: bound, in a class
// that binds a new claim at once (a clone bound at a later first use
// would copy whatever the volume holds then).
func (v *Vendor) clonable(ctx context.Context, id, claim string) error {
	pvc, err := v.core.CoreV1().PersistentVolumeClaims(v.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: fork box %s: its volume claim: %w", id, v.mapErr(err, id))
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		return &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "its volume claim " + claim + " is not bound"}
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "its volume has no StorageClass to clone it with"}
	}
	sc, err := v.core.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubernetes: fork box %s: storage class %s: %w", id, *pvc.Spec.StorageClassName, err)
	}
	if m := sc.VolumeBindingMode; m != nil && *m == storagev1.VolumeBindingWaitForFirstConsumer {
		return &vendors.NotSuspendableError{Vendor: Name, ID: id,
			Reason: "storage class " + sc.Name + " binds a claim at its first use, so a clone would not be taken at the fork"}
	}
	return nil
}

// waitBound polls until claim name is bound (its clone made).
func (v *Vendor) waitBound(ctx context.Context, name string) error {
	err := wait.PollUntilContextTimeout(ctx, pollEvery, forkBound, true, func(ctx context.Context) (bool, error) {
		pvc, err := v.core.CoreV1().PersistentVolumeClaims(v.ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, err
		case pvc.Status.Phase == corev1.ClaimLost:
			return false, fmt.Errorf("volume claim %s lost its volume", name)
		}
		return pvc.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("volume claim %s not bound within %v: %w", name, forkBound, err)
	}
	return err
}
