// Command localpv is the test bed's volume provisioner: it provisions the
// PersistentVolumeClaims of one StorageClass as directories on the single
// node (hostPath volumes), and removes a directory when its released
// volume's reclaim policy is Delete. A claim whose dataSource is another
// claim of the namespace is provisioned as a copy of that claim's
// directory, owners and modes kept: a clone, as CSI drivers make one.
//
// A volume's directory is mode 0777, so a pod's non-root user can write it
// as it could a volume that honours fsGroup (hostPath does not). It makes
// the StorageClass itself (Immediate binding: a clone is taken when its
// claim is made) and serves GET /healthz once its informers have synced.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/tangle-network/boxctl/internal/treecopy"
)

// Name is the provisioner's name in its StorageClass.
const Name = "boxctl.dev/local-path"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localpv:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		kubeconfig = flag.String("kubeconfig", "", "kubeconfig of the provisioner's identity")
		root       = flag.String("root", "", "directory that holds the volumes")
		node       = flag.String("node", "localhost", "the node the volumes are on")
		class      = flag.String("class", "boxctl-local", "the StorageClass to make and serve")
		health     = flag.String("health", "127.0.0.1:8482", "address of GET /healthz")
	)
	flag.Parse()
	if *kubeconfig == "" || *root == "" || !filepath.IsAbs(*root) {
		return errors.New("-kubeconfig and an absolute -root are required")
	}
	if err := os.MkdirAll(*root, 0o700); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := ensureClass(ctx, cs, *class); err != nil {
		return err
	}
	var ready atomic.Bool
	ln, err := net.Listen("tcp", *health)
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	p := &provisioner{cs: cs, root: filepath.Clean(*root), node: *node, log: log}
	pc := controller.NewProvisionController(ctx, cs, Name, p,
		controller.LeaderElection(false),
		controller.Threadiness(4),
		controller.FailedProvisionThreshold(5),
		controller.FailedDeleteThreshold(5))
	go func() {
		// The controller's informers sync before its workers start.
		for ctx.Err() == nil && !pc.HasRun() {
			time.Sleep(50 * time.Millisecond)
		}
		ready.Store(true)
	}()
	log.Info("provisioning", "class", *class, "root", *root, "node", *node)
	pc.Run(ctx)
	return nil
}

// ensureClass makes the StorageClass, or checks that the one there is
// this provisioner's.
func ensureClass(ctx context.Context, cs kubernetes.Interface, name string) error {
	del := corev1.PersistentVolumeReclaimDelete
	bind := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: Name,
		ReclaimPolicy: &del, VolumeBindingMode: &bind}
	_, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	got, err := cs.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got.Provisioner != Name {
		return fmt.Errorf("storage class %s is provisioned by %s, not %s", name, got.Provisioner, Name)
	}
	return nil
}

type provisioner struct {
	cs   kubernetes.Interface
	root string
	node string
	log  *slog.Logger
}

// Provision makes the claim's directory (a copy of its source claim's when
// it has one) and its volume.
func (p *provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	dir := filepath.Join(p.root, o.PVName)
	if err := os.RemoveAll(dir); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if ds := o.PVC.Spec.DataSource; ds != nil {
		if ds.Kind != "PersistentVolumeClaim" || (ds.APIGroup != nil && *ds.APIGroup != "") {
			return nil, controller.ProvisioningFinished, fmt.Errorf("data source %s %s: only a claim can be cloned", ds.Kind, ds.Name)
		}
		src, err := p.claimDir(ctx, o.PVC.Namespace, ds.Name)
		if err != nil {
			return nil, controller.ProvisioningNoChange, err
		}
		if err := treecopy.Copy(ctx, src, dir); err != nil {
			return nil, controller.ProvisioningFinished, err
		}
		if err := keepOwners(src, dir); err != nil {
			return nil, controller.ProvisioningFinished, err
		}
	} else if err := os.Mkdir(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	policy := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		policy = *o.StorageClass.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: policy,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: new(corev1.HostPathDirectory)},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{p.node}}},
			}}}},
		},
	}
	p.log.Info("provisioned", "pv", o.PVName, "claim", o.PVC.Namespace+"/"+o.PVC.Name, "dir", dir)
	return pv, controller.ProvisioningFinished, nil
}

// claimDir is the directory of a bound claim's volume.
func (p *provisioner) claimDir(ctx context.Context, ns, name string) (string, error) {
	pvc, err := p.cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("source claim %s/%s: %w", ns, name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("source claim %s/%s is not bound", ns, name)
	}
	pv, err := p.cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("source volume %s: %w", pvc.Spec.VolumeName, err)
	}
	return p.dirOf(pv)
}

// dirOf is the directory of one of this provisioner's volumes.
func (p *provisioner) dirOf(pv *corev1.PersistentVolume) (string, error) {
	hp := pv.Spec.HostPath
	if hp == nil || filepath.Dir(filepath.Clean(hp.Path)) != p.root {
		return "", fmt.Errorf("volume %s is not under %s", pv.Name, p.root)
	}
	return filepath.Clean(hp.Path), nil
}

// Delete removes a released volume's directory.
func (p *provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	dir, err := p.dirOf(pv)
	if err != nil {
		return err
	}
	p.log.Info("deleted", "pv", pv.Name, "dir", dir)
	return os.RemoveAll(dir)
}

// keepOwners gives each path of the copy dst the owner of its source in
// src (the copy is made by root).
func keepOwners(src, dst string) error {
	return filepath.WalkDir(dst, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dst, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("path %s outside %s", path, dst)
		}
		fi, err := os.Lstat(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		return os.Lchown(path, int(st.Uid), int(st.Gid))
	})
}
