package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func claim(name string, source string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if source != "" {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	}
	return c
}

// TestProvisioner provisions a plain volume (an empty world-writable
// directory), a clone of it (its files, modes and owners), refuses a
// source that is not a claim and a volume outside its root, and deletes.
func TestProvisioner(t *testing.T) {
	root := t.TempDir()
	cs := fake.NewClientset()
	p := &provisioner{cs: cs, root: root, node: "localhost", log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := t.Context()
	del := corev1.PersistentVolumeReclaimDelete
	class := &storagev1.StorageClass{ReclaimPolicy: &del}

	pv, state, err := p.Provision(ctx, controller.ProvisionOptions{PVName: "pv-a", PVC: claim("a", ""), StorageClass: class})
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision = %v, %v", state, err)
	}
	dir := filepath.Join(root, "pv-a")
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("volume directory %v, %v; want mode 0777", fi, err)
	}
	if pv.Spec.HostPath.Path != dir || pv.Spec.PersistentVolumeReclaimPolicy != del || pv.Spec.Capacity.Storage().String() != "1Gi" {
		t.Errorf("volume = %+v", pv.Spec)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("kept"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "f"), 10001, 10001); err != nil {
		t.Fatal(err)
	}
	bound := claim("a", "")
	bound.Spec.VolumeName = "pv-a"
	if _, err := cs.CoreV1().PersistentVolumeClaims("ns").Create(ctx, bound, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if _, _, err := p.Provision(ctx, controller.ProvisionOptions{PVName: "pv-b", PVC: claim("b", "a"), StorageClass: class}); err != nil {
		t.Fatalf("Provision of a clone: %v", err)
	}
	fi, err := os.Stat(filepath.Join(root, "pv-b", "f"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "pv-b", "f")); string(got) != "kept" || fi.Mode().Perm() != 0o640 {
		t.Errorf("cloned file %q mode %v, want kept 0640", got, fi.Mode().Perm())
	}
	if uid := statUID(t, filepath.Join(root, "pv-b", "f")); uid != 10001 {
		t.Errorf("cloned file owner %d, want 10001", uid)
	}

	snap := claim("c", "")
	snap.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: new("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "s"}
	if _, state, err := p.Provision(ctx, controller.ProvisionOptions{PVName: "pv-c", PVC: snap, StorageClass: class}); err == nil || state != controller.ProvisioningFinished {
		t.Errorf("Provision from a snapshot = %v, %v; want a final refusal", state, err)
	}
	if _, state, err := p.Provision(ctx, controller.ProvisionOptions{PVName: "pv-d", PVC: claim("d", "missing"), StorageClass: class}); err == nil || state != controller.ProvisioningNoChange {
		t.Errorf("Provision from a missing claim = %v, %v; want a retry", state, err)
	}

	outside := pv.DeepCopy()
	outside.Spec.HostPath.Path = "/etc"
	if err := p.Delete(ctx, outside); err == nil {
		t.Error("Delete of a volume outside the root succeeded")
	}
	if err := p.Delete(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("volume directory after Delete: %v", err)
	}
}

func statUID(t *testing.T, path string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid
}
