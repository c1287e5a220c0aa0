package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// Box is one Sandbox and its pod. It is safe for concurrent use.
type Box struct {
	procLayer // Spawn, Process, Read and Write
	v         *Vendor
	id        string // the Sandbox's name
	pod       string // its pod's name
	// ports are the box's exposed ports when this process claimed it
	// (nil: read them from the Sandbox).
	ports []int
}

var (
	_ vendors.Box       = (*Box)(nil)
	_ vendors.Addressed = (*Box)(nil)
)

// Address returns the pod's IP, where its traffic to HostAddress comes
// from (the cluster's network does not masquerade traffic to the node).
func (b *Box) Address(ctx context.Context) (netip.Addr, error) {
	pod, err := b.v.core.CoreV1().Pods(b.v.ns).Get(ctx, b.pod, metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("kubernetes: address of box %s: %w", b.id, b.v.mapErr(err, b.id))
	}
	if pod.Status.PodIP == "" {
		return netip.Addr{}, fmt.Errorf("kubernetes: box %s: its pod has no IP yet", b.id)
	}
	return netip.ParseAddr(pod.Status.PodIP)
}

// ID returns the Sandbox's name.
func (b *Box) ID() string { return b.id }

// Pod returns the name of the box's pod.
func (b *Box) Pod() string { return b.pod }

// Status reads the Sandbox.
func (b *Box) Status(ctx context.Context) (vendors.Info, error) {
	sb, err := b.v.agents.AgentsV1beta1().Sandboxes(b.v.ns).Get(ctx, b.id, metav1.GetOptions{})
	if err == nil && sb.DeletionTimestamp != nil {
		err = apierrors.NewNotFound(agentsv1.Resource("sandboxes"), b.id)
	}
	if err != nil {
		return vendors.Info{}, fmt.Errorf("kubernetes: status: %w", b.v.mapErr(err, b.id))
	}
	return sandboxInfo(sb), nil
}

// NotReadyError is a box whose Sandbox did not become Ready: Reason and
// Message are the controller's or the kubelet's (an image pull error, an
// unschedulable pod, a container that would not start).
type NotReadyError struct {
	ID      string
	Reason  string
	Message string
	// Err is the wait's own end (a deadline), if that ended it.
	Err error
}

func (e *NotReadyError) Error() string {
	msg := fmt.Sprintf("kubernetes: box %s not ready", e.ID)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

// Unwrap returns the wait's end.
func (e *NotReadyError) Unwrap() error { return e.Err }

// fatalWaiting are container waiting reasons that do not clear by
// themselves.
var fatalWaiting = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}

// waitReady reads the Sandbox and its pod, then watches both from there,
// until the Sandbox is Ready, a container of the pod cannot start, or the
// ready timeout passes.
func (b *Box) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, b.v.o.readyTimeout,
		fmt.Errorf("not ready within %v", b.v.o.readyTimeout))
	defer cancel()
	sbs := b.v.agents.AgentsV1beta1().Sandboxes(b.v.ns)
	pods := b.v.core.CoreV1().Pods(b.v.ns)
	w := readyWait{b: b, last: NotReadyError{ID: b.id}}
	for {
		sb, err := sbs.Get(ctx, b.id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &NotReadyError{ID: b.id, Reason: "Deleted", Message: "the sandbox was deleted while starting"}
		}
		if err != nil {
			return w.fail(ctx, err)
		}
		if done, err := w.sandbox(sb); done {
			return err
		}
		// A list, not a get: the watch then starts at the list's version
		// even when there is no pod yet. A watch from no version would
		// start from the API server's cache, which may still hold the pod
		// a suspend just saw deleted.
		byName := metav1.ListOptions{FieldSelector: "metadata.name=" + b.pod}
		list, err := pods.List(ctx, byName)
		if err != nil {
			return w.fail(ctx, err)
		}
		for i := range list.Items {
			if err := w.pod(&list.Items[i]); err != nil {
				return err
			}
		}
		sw, err := sbs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + b.id, ResourceVersion: sb.ResourceVersion})
		if err != nil {
			return w.fail(ctx, err)
		}
		byName.ResourceVersion = list.ResourceVersion
		pw, err := pods.Watch(ctx, byName)
		if err != nil {
			sw.Stop()
			return w.fail(ctx, err)
		}
		done, err := w.watch(ctx, sw, pw)
		sw.Stop()
		pw.Stop()
		if done {
			return err
		}
	}
}

// readyWait is one waitReady: what it saw last, for the error of a box
// that never got ready.
type readyWait struct {
	b    *Box
	last NotReadyError
}

// watch reads both watches until an answer (done), or until one ends or
// errs (to be read and watched again).
func (w *readyWait) watch(ctx context.Context, sw, pw watch.Interface) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return true, w.fail(ctx, nil)
		case ev, ok := <-sw.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false, nil
			}
			if ev.Type == watch.Deleted {
				return true, &NotReadyError{ID: w.b.id, Reason: "Deleted", Message: "the sandbox was deleted while starting"}
			}
			if sb, ok := ev.Object.(*agentsv1.Sandbox); ok {
				if done, err := w.sandbox(sb); done {
					return true, err
				}
			}
		case ev, ok := <-pw.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false, nil
			}
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
				if err := w.pod(pod); err != nil {
					return true, err
				}
			}
		}
	}
}

// sandbox reads the Sandbox's Ready condition: done when it holds or can
// no longer come (its pod finished, its time expired, its pod refused).
func (w *readyWait) sandbox(sb *agentsv1.Sandbox) (bool, error) {
	if c := meta.FindStatusCondition(sb.Status.Conditions, string(agentsv1.SandboxConditionFinished)); c != nil && c.Status == metav1.ConditionTrue {
		return true, &NotReadyError{ID: w.b.id, Reason: c.Reason, Message: c.Message}
	}
	for _, c := range sb.Status.Conditions {
		if c.Type != string(agentsv1.SandboxConditionReady) {
			continue
		}
		// A condition of an earlier generation (a resume's Suspended to
		// Running) is not the answer yet.
		if c.Status == metav1.ConditionTrue && c.ObservedGeneration >= sb.Generation {
			return true, nil
		}
		if c.Reason == agentsv1.SandboxReasonExpired || refused(c) {
			return true, &NotReadyError{ID: w.b.id, Reason: c.Reason, Message: c.Message}
		}
		if w.last.Reason == "" || w.last.Reason == "DependenciesNotReady" || c.Reason != "DependenciesNotReady" {
			w.last.Reason, w.last.Message = c.Reason, c.Message
		}
	}
	return false, nil
}

// pod fails a pod that cannot become ready, and notes why one is not yet.
// A pod being deleted is not the one to wait for: it is the pod of before
// a suspend (the controller makes a new one after it), or one the Sandbox
// will report on.
func (w *readyWait) pod(pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil {
		return nil
	}
	if err := podFailure(w.b.id, pod); err != nil {
		return err
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			w.last.Reason, w.last.Message = c.Reason, c.Message
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if st := cs.State.Waiting; st != nil && st.Reason != "" && st.Reason != "ContainerCreating" {
			w.last.Reason, w.last.Message = st.Reason, st.Message
		}
	}
	return nil
}

// fail is the error of a wait that ended (err, or the context's end)
// before the box was ready.
func (w *readyWait) fail(ctx context.Context, err error) error {
	e := w.last
	if err == nil {
		err = context.Cause(ctx)
	}
	e.Err = err
	return &e
}

// refused reports a controller error that retrying cannot cure: the API
// server refused the pod it makes (an admission or validation failure, a
// RuntimeClass that does not exist).
func refused(c metav1.Condition) bool {
	if c.Reason != "ReconcilerError" {
		return false
	}
	for _, s := range []string{"is forbidden", "is invalid", "Invalid value", "RuntimeClass"} {
		if strings.Contains(c.Message, s) {
			return true
		}
	}
	return false
}

// podFailure is the error of a pod that cannot become ready.
func podFailure(id string, pod *corev1.Pod) error {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && slices.Contains(fatalWaiting, w.Reason) {
			return &NotReadyError{ID: id, Reason: w.Reason, Message: w.Message}
		}
		if t := cs.State.Terminated; t != nil {
			return &NotReadyError{ID: id, Reason: "Terminated", Message: fmt.Sprintf("container %s exited %d (%s) %s", cs.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))}
		}
	}
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return &NotReadyError{ID: id, Reason: string(pod.Status.Phase), Message: pod.Status.Message}
	}
	return nil
}

// Exec runs a command to completion. Its environment travels on its
// stdin, ahead of spec.Stdin, so it is in no command line; if ctx ends
// first, the command's session is killed in the box.
func (b *Box) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	return vendors.StreamExec(ctx, Name, spec, func(ctx context.Context, stdout, stderr io.Writer) (int, error) {
		return b.exec(ctx, "exec", spec.Command, spec.Env, spec.Dir, spec.Stdin, stdout, stderr)
	})
}

// exec runs cmd in the box with env (on its stdin, ahead of stdin) and
// dir, copies its output to stdout and stderr as it comes, and returns its
// exit status. The command runs in a session of its own
// (boxproc.ExecEnvWrapper), which a cancelled ctx kills.
func (b *Box) exec(ctx context.Context, op string, cmd []string, env map[string]string, dir string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	envIn, err := boxproc.EnvLines(env)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: %s: %w", op, err)
	}
	in := io.Reader(strings.NewReader(envIn))
	if stdin != nil {
		in = io.MultiReader(in, stdin)
	}
	pidFile := boxproc.ExecDir + "/" + boxproc.RandomID()
	wrapped := append([]string{"/bin/sh", "-c", boxproc.ExecEnvWrapper, pidFile, dir}, cmd...)
	stop := context.AfterFunc(ctx, func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = b.Exec(kctx, vendors.ExecSpec{Command: boxproc.KillSession(pidFile)})
	})
	defer stop()
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	return b.stream(ctx, op, wrapped, in, stdout, stderr)
}

// Endpoint forwards a local port on 127.0.0.1 to port in the box's pod
// through the API server. The forward is the vendor's: it lasts until
// Destroy or the vendor's Close.
func (b *Box) Endpoint(ctx context.Context, port int) (vendors.Endpoint, error) {
	ports := b.ports
	if ports == nil {
		info, err := b.Status(ctx)
		if err != nil {
			return vendors.Endpoint{}, fmt.Errorf("kubernetes: endpoint: %w", err)
		}
		if ports, err = boxmeta.ParsePorts(info.Labels[boxmeta.LabelPorts]); err != nil {
			return vendors.Endpoint{}, fmt.Errorf("kubernetes: endpoint: %w", err)
		}
	}
	if !slices.Contains(ports, port) {
		return vendors.Endpoint{}, fmt.Errorf("kubernetes: box %s does not expose port %d", b.id, port)
	}
	f, err := b.v.forward(b, port)
	if err != nil {
		return vendors.Endpoint{}, fmt.Errorf("kubernetes: endpoint: %w", err)
	}
	return vendors.Endpoint{URL: "http://" + f.Addr()}, nil
}

// Destroy deletes the box's claim (if it was claimed), its Sandbox and its
// pod, without waiting for the pod's grace period; a box already gone is
// not an error.
func (b *Box) Destroy(ctx context.Context) error {
	b.v.stopForwards(b.id)
	bg := metav1.DeletePropagationBackground
	var errs []error
	// A claimed box goes with its claim, which would otherwise make a new
	// Sandbox for itself.
	sb, err := b.v.agents.AgentsV1beta1().Sandboxes(b.v.ns).Get(ctx, b.id, metav1.GetOptions{})
	if err == nil {
		if ref := metav1.GetControllerOf(sb); ref != nil && ref.Kind == "SandboxClaim" {
			errs = append(errs, b.v.deleteClaim(ctx, ref.Name))
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("sandbox: %w", err))
	} else {
		// A claim whose Sandbox the controller has not made yet (none
		// is not an error).
		errs = append(errs, b.v.deleteClaim(ctx, b.id))
	}
	if err := b.v.agents.AgentsV1beta1().Sandboxes(b.v.ns).Delete(ctx, b.id, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("sandbox: %w", err))
	}
	if err := b.v.core.CoreV1().Pods(b.v.ns).Delete(ctx, b.pod, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("pod: %w", err))
	}
	// Its owner, the Sandbox, takes it too; not waiting for that.
	errs = append(errs, b.v.deleteNetworkPolicy(ctx, b.id))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kubernetes: destroy box %s: %w", b.id, err)
	}
	return nil
}
