package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/tangle-network/boxctl/vendors"
)

// stream runs cmd in the box's container through the pod's exec
// subresource (WebSocket, falling back to SPDY on servers without it, as
// kubectl does) with the given streams, and returns its exit status. The
// command line is in the request (and so in an audit log): it never holds
// a secret; secrets travel on stdin.
func (b *Box) stream(ctx context.Context, op string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	req := b.v.core.CoreV1().RESTClient().Post().Namespace(b.v.ns).Resource("pods").Name(b.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: ContainerName,
			Command:   cmd,
			Stdin:     stdin != nil,
			Stdout:    stdout != nil,
			Stderr:    stderr != nil,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.v.cfg, http.MethodGet, req.URL().String())
	if err != nil {
		return 0, fmt.Errorf("kubernetes: %s: %w", op, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.v.cfg, http.MethodPost, req.URL())
	if err != nil {
		return 0, fmt.Errorf("kubernetes: %s: %w", op, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("kubernetes: %s: %w", op, err)
	}
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	var exit utilexec.CodeExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		return exit.ExitStatus(), nil
	case ctx.Err() != nil:
		return 0, fmt.Errorf("kubernetes: %s %s: %w", op, cmd[0], context.Cause(ctx))
	}
	return 0, fmt.Errorf("kubernetes: %s %s: %w", op, cmd[0], b.gone(ctx, op, err))
}

// gone maps an error during an operation in the box to the vendors' typed
// errors: *vendors.NotFoundError when the box is not there, a
// *vendors.GoneError when its pod ended under the operation.
func (b *Box) gone(ctx context.Context, op string, err error) error {
	ctx = context.WithoutCancel(ctx)
	if apierrors.IsNotFound(err) {
		if _, serr := b.v.agents.AgentsV1beta1().Sandboxes(b.v.ns).Get(ctx, b.id, metav1.GetOptions{}); apierrors.IsNotFound(serr) {
			return fmt.Errorf("%w: %v", &vendors.NotFoundError{Vendor: Name, ID: b.id}, err)
		}
	}
	pod, perr := b.v.core.CoreV1().Pods(b.v.ns).Get(ctx, b.pod, metav1.GetOptions{})
	if apierrors.IsNotFound(perr) || (perr == nil && (pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)) {
		return &vendors.GoneError{Vendor: Name, ID: b.id, Op: op, Err: err}
	}
	return err
}
