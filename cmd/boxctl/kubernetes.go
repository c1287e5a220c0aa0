package main

import (
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// The Kubernetes vendor of the box verbs: the cluster is found as kubectl
// finds it ($KUBECONFIG, ~/.kube/config, or the pod's service account),
// and these tune it:
//
//	BOXCTL_KUBE_CONTEXT       the kubeconfig context (default: the current one)
//	BOXCTL_KUBE_NAMESPACE     the boxes' namespace (default: the context's)
//	BOXCTL_KUBE_POOL          a SandboxTemplate with a warm pool to claim boxes from
//	BOXCTL_KUBE_HOST_ADDRESS  this machine's address as the cluster's pods reach
//	                          it, for --router local
const (
	envKubeContext = "BOXCTL_KUBE_CONTEXT"
	envKubeNS      = "BOXCTL_KUBE_NAMESPACE"
	envKubePool    = "BOXCTL_KUBE_POOL"
	envKubeHost    = "BOXCTL_KUBE_HOST_ADDRESS"
)

// client-go also reports through klog, straight to stderr, what it
// returns as errors (a closed stream of a cancelled exec, say): boxctl
// reports those errors itself. Set before any client runs.
func init() { klog.SetLogger(logr.Discard()) }

func newKubernetes(a *app) (*kubernetes.Vendor, error) {
	opts := []kubernetes.Option{kubernetes.WithLogger(a.log)}
	if c := os.Getenv(envKubeContext); c != "" {
		opts = append(opts, kubernetes.WithContext(c))
	}
	if ns := os.Getenv(envKubeNS); ns != "" {
		opts = append(opts, kubernetes.WithNamespace(ns))
	}
	if p := os.Getenv(envKubePool); p != "" {
		opts = append(opts, kubernetes.WithWarmPool(p))
	}
	if h := os.Getenv(envKubeHost); h != "" {
		opts = append(opts, kubernetes.WithHostAddress(h))
	}
	v, err := kubernetes.New(opts...)
	if err != nil {
		return nil, usageError{err}
	}
	return v, nil
}
