// Package kubetest is a test helper: it points the Kubernetes vendor
// (vendors/kubernetes) at the test bed's cluster (`make testbed` brings up
// a single-node cluster with the agent-sandbox controller), with the real
// box image (internal/boxtest) pushed to the test bed's registry, from
// which the cluster pulls it. Describe shows what the cluster shows of a
// box (kubectl's YAML of its Sandbox and pod, and the API server's audit
// log of it), for the checks that no secret appears there.
package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	agentsv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// client-go reports on stderr, through klog, what it also returns as
// errors (a closed stream after an exec): keep test output (and benchmark
// lines) readable, as boxctl does.
func init() { klog.SetLogger(logr.Discard()) }

// Image returns the box image built with opts, in the test bed's registry.
func Image(t testing.TB, opts boxtest.Options) string {
	t.Helper()
	return boxtest.Pushed(t, opts)
}

// Vendor returns a Kubernetes vendor on the test bed's cluster, closed at
// the end of t.
func Vendor(t testing.TB, opts ...kubernetes.Option) *kubernetes.Vendor {
	t.Helper()
	env := testbed.RequireKubeStorage(t)
	v, err := kubernetes.New(append([]kubernetes.Option{kubernetes.WithKubeconfig(env.Kubeconfig),
		kubernetes.WithStorageClass(env.KubeStorageClass)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// Kubectl runs the test bed's kubectl with args and returns its output,
// failing t when it fails.
func Kubectl(t testing.TB, args ...string) []byte {
	t.Helper()
	out, err := kubectl(testbed.Require(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kubectl(env testbed.Env, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The test bed's discovery cache, which its `up` drops when the
	// served API versions change (not ~/.kube/cache, which would keep
	// asking for a version the cluster no longer serves).
	cache := filepath.Join(filepath.Dir(env.Kubeconfig), "kubectl-cache")
	cmd := exec.CommandContext(ctx, env.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig, "--cache-dir", cache}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Describe returns `kubectl get sandbox,pod -o yaml` of the box and every
// line of the API server's audit log that names it or its pod (exec and
// port-forward requests with their command lines included), failing t
// when it cannot.
func Describe(t testing.TB, box vendors.Box) []byte {
	t.Helper()
	pod := ""
	if kb, ok := box.(*kubernetes.Box); ok {
		pod = kb.Pod()
	}
	out, err := describe(testbed.Require(t), box.ID(), pod)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// DescribeID is Describe of the box id of v (only its Sandbox's when it is
// gone), for callers off the test's goroutine: it returns its error.
func DescribeID(t testing.TB, v *kubernetes.Vendor, id string) ([]byte, error) {
	env := testbed.Require(t)
	pod := ""
	if box, err := v.Connect(context.Background(), id); err == nil {
		pod = box.(*kubernetes.Box).Pod()
	}
	return describe(env, id, pod)
}

func describe(env testbed.Env, id, pod string) ([]byte, error) {
	names := []string{id}
	args := []string{"get", "sandbox/" + id}
	if pod != "" {
		names = append(names, pod)
		args = append(args, "pod/"+pod)
	}
	out, err := kubectl(env, append(args, "-o", "yaml", "--ignore-not-found")...)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(env.KubeAuditLog)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	lines := 0
	for sc.Scan() {
		for _, n := range names {
			if bytes.Contains(sc.Bytes(), []byte(n)) {
				out = append(append(out, sc.Bytes()...), '\n')
				lines++
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if lines == 0 {
		return nil, fmt.Errorf("the audit log %s has no line about box %s: is auditing on?", env.KubeAuditLog, id)
	}
	return out, nil
}

// Sandbox reads the Sandbox of box id as the cluster holds it, failing t
// when it cannot.
func Sandbox(t testing.TB, id string) *agentsv1.Sandbox {
	t.Helper()
	var sb agentsv1.Sandbox
	if err := json.Unmarshal(Kubectl(t, "get", "sandbox/"+id, "-o", "json"), &sb); err != nil {
		t.Fatalf("sandbox %s: %v", id, err)
	}
	return &sb
}
