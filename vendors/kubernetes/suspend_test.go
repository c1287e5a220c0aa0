package kubernetes_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/kubetest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// keptHash is a digest of every file a suspend keeps (the workspace and
// the home), names and contents.
func keptHash(t *testing.T, b vendors.Box) string {
	t.Helper()
	res, err := b.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
		"cd / && find workspace home/box -type f | sort | xargs -r sha256sum | sha256sum"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("hash the kept files: %v %s", err, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// TestVendor_SuspendResumeFork suspends a box (its pod goes, its volume
// stays), resumes it with the files and the budget it had, forks it into
// two boxes of cloned volumes, and lets gc remove it past its retention.
func TestVendor_SuspendResumeFork(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	img := kubetest.Image(t, boxtest.Options{})
	cs := clientset(t)
	ctx := t.Context()
	tag := vendortest.RunTag(t)
	box := create(t, v, vendors.CreateSpec{Image: img, RunTag: tag, Lifetime: 5 * time.Minute, Retention: time.Hour})
	if res, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c",
		"head -c 100000 /dev/urandom > /workspace/blob && mkdir -p /workspace/d && echo kept > /workspace/d/f && echo session > ~/.session"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("write files: %v %s", err, res.Stderr)
	}
	before := keptHash(t, box)
	if _, err := box.Spawn(ctx, vendors.SpawnSpec{Name: "keeper", Command: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	pod := box.(*kubernetes.Box).Pod()
	var mem uint64
	polltest.Until(t, time.Minute, "the kubelet's stats of the box's pod", func() bool {
		var ok bool
		mem, ok = podMemory(t, cs, pod)
		return ok && mem > 0
	})
	t.Logf("the running box's pod holds %.1f MiB (working set)", float64(mem)/(1<<20))

	start := time.Now()
	info, err := v.Suspend(ctx, box.ID())
	if err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	t.Logf("suspend took %v", time.Since(start))
	if info.BudgetLeft <= 4*time.Minute || info.BudgetLeft > 5*time.Minute || time.Until(info.RetainUntil) < 59*time.Minute {
		t.Errorf("Suspend = %+v, want about 5m of budget left and an hour of retention", info)
	}
	// The pod, and with it every CPU and byte of memory it held, is gone.
	if _, err := cs.CoreV1().Pods(v.Namespace()).Get(ctx, pod, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod of a suspended box: %v, want it gone", err)
	}
	polltest.Until(t, time.Minute, "the kubelet to drop the suspended pod's stats", func() bool {
		_, ok := podMemory(t, cs, pod)
		return !ok
	})
	claim := kubernetes.DiskVolume + "-" + box.ID()
	if pvc, err := cs.CoreV1().PersistentVolumeClaims(v.Namespace()).Get(ctx, claim, metav1.GetOptions{}); err != nil || pvc.Status.Phase != "Bound" {
		t.Fatalf("the suspended box's volume claim: %v %v, want it bound", err, pvc)
	}
	st, err := box.Status(ctx)
	if err != nil || st.State != vendors.StateSuspended || !st.Deadline.Equal(info.RetainUntil) {
		t.Errorf("Status of a suspended box = %s until %v (%v), want suspended until %v", st.State, st.Deadline, err, info.RetainUntil)
	}
	sb := kubetest.Sandbox(t, box.ID())
	if sb.Spec.ShutdownTime == nil || !sb.Spec.ShutdownTime.Time.Equal(info.RetainUntil.Truncate(time.Second)) {
		t.Errorf("shutdownTime of a suspended box = %v, want the end of its retention %v", sb.Spec.ShutdownTime, info.RetainUntil)
	}
	if again, err := v.Suspend(ctx, box.ID()); err != nil || again.BudgetLeft != info.BudgetLeft {
		t.Errorf("a second Suspend = %+v, %v; want the first's record", again, err)
	}

	start = time.Now()
	resumed, err := v.Resume(ctx, box.ID())
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	t.Logf("resume to ready took %v", time.Since(start))
	if got := keptHash(t, resumed); got != before {
		t.Errorf("kept files' hash after resume = %s, want %s", got, before)
	}
	if _, err := resumed.Spawn(ctx, vendors.SpawnSpec{Name: "keeper", Command: []string{"true"}}); err != nil {
		t.Errorf("Spawn of a name the earlier run used: %v", err)
	}
	st, err = resumed.Status(ctx)
	if left := time.Until(st.Deadline); err != nil || st.State != vendors.StateRunning || left > info.BudgetLeft+time.Second || left < info.BudgetLeft-time.Minute {
		t.Errorf("Status after resume = %s, %v left (%v), want running with %v left", st.State, left, err, info.BudgetLeft)
	}
	res, err := resumed.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "echo $" + boxmeta.EnvDeadline}})
	if want := boxmeta.FormatDeadline(st.Deadline); err != nil || strings.TrimSpace(string(res.Stdout)) != want {
		t.Errorf("the resumed box's init enforces %q (%v), want the new deadline %s", res.Stdout, err, want)
	}
	if _, err := v.Resume(ctx, box.ID()); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Resume of a running box = %v, want ErrNotSuspendable", err)
	}
	if _, err := v.Fork(ctx, box.ID(), 1); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Fork of a running box = %v, want ErrNotSuspendable", err)
	}

	// Fork: two boxes of cloned volumes, each resumable on its own.
	if _, err := v.Suspend(ctx, box.ID()); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	ids, err := v.Fork(ctx, box.ID(), 2)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	t.Logf("fork of 2 took %v", time.Since(start))
	for i, id := range ids {
		t.Cleanup(func() {
			if b, err := v.Connect(t.Context(), id); err == nil {
				_ = b.Destroy(t.Context())
			}
		})
		if st, err := v.Connect(ctx, id); err != nil {
			t.Fatal(err)
		} else if info, err := st.Status(ctx); err != nil || info.State != vendors.StateSuspended || info.Labels[boxmeta.LabelForkOf] != box.ID() {
			t.Errorf("fork %d = %s, labels %v (%v), want a suspended fork of %s", i, info.State, info.Labels, err, box.ID())
		}
		fb, err := v.Resume(ctx, id)
		if err != nil {
			t.Fatalf("Resume fork %d: %v", i, err)
		}
		if got := keptHash(t, fb); got != before {
			t.Errorf("fork %d kept files' hash = %s, want %s", i, got, before)
		}
		if res, err := fb.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "echo fork > /workspace/d/f"}}); err != nil || res.ExitCode != 0 {
			t.Fatalf("write in fork %d: %v %s", i, err, res.Stderr)
		}
		if err := fb.Destroy(ctx); err != nil {
			t.Errorf("destroy fork %d: %v", i, err)
		}
	}
	if src, err := v.Resume(ctx, box.ID()); err != nil {
		t.Fatal(err)
	} else if got := keptHash(t, src); got != before {
		t.Errorf("the source's files changed with its forks: %s, want %s", got, before)
	}

	// A box suspended past its retention is gone after gc, its volume too.
	if _, err := v.Suspend(ctx, box.ID()); err != nil {
		t.Fatal(err)
	}
	vendortest.ReapPastRetention(t, v, tag, box.ID(), 2*time.Hour)
	polltest.Until(t, time.Minute, "the reaped box's volume claim to go", func() bool {
		_, err := cs.CoreV1().PersistentVolumeClaims(v.Namespace()).Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestVendor_SuspendRefusals refuses to suspend a box made without a
// retention, and to resume or fork a box that is not suspended.
func TestVendor_SuspendRefusals(t *testing.T) {
	t.Parallel()
	v := kubetest.Vendor(t)
	img := kubetest.Image(t, boxtest.Options{})
	plain := create(t, v, vendors.CreateSpec{Image: img})
	if _, err := v.Suspend(t.Context(), plain.ID()); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Suspend of a box without a retention = %v, want ErrNotSuspendable", err)
	}
	if _, err := v.Resume(t.Context(), plain.ID()); !errors.Is(err, vendors.ErrNotSuspendable) {
		t.Errorf("Resume of a box without a retention = %v, want ErrNotSuspendable", err)
	}
	if _, err := v.Suspend(t.Context(), "boxctl-gone-0"); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Suspend of a box that does not exist = %v, want ErrNotFound", err)
	}
}

// podMemory reads the working set of pod from the kubelet's summary (via
// the API server); ok is false when the node runs no such pod.
func podMemory(t *testing.T, cs k8s.Interface, pod string) (uint64, bool) {
	t.Helper()
	// The API server proxies to no loopback node: ask the kubelet, as the
	// test bed's admin.
	node, err := cs.CoreV1().Nodes().Get(t.Context(), "localhost", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(adminConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/stats/summary", node.Status.DaemonEndpoints.KubeletEndpoint.Port))
	if err != nil {
		t.Fatalf("the kubelet's summary: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the kubelet's summary: %s %v: %s", resp.Status, err, raw)
	}
	var sum struct {
		Pods []struct {
			PodRef struct{ Name string } `json:"podRef"`
			Memory *struct {
				WorkingSetBytes *uint64 `json:"workingSetBytes"`
			} `json:"memory"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatal(err)
	}
	for _, p := range sum.Pods {
		if p.PodRef.Name == pod {
			if p.Memory == nil || p.Memory.WorkingSetBytes == nil {
				return 0, true
			}
			return *p.Memory.WorkingSetBytes, true
		}
	}
	return 0, false
}
