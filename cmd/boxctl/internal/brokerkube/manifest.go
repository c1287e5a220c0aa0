// Package brokerkube runs the credential broker in a Kubernetes cluster:
// the manifest of its Deployment and Services (Manifest), and an image of
// the static boxctl binary to run there (Image).
package brokerkube

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The names of what Manifest makes, and its ports.
const (
	// Name is the Deployment's, and the Service boxes reach.
	Name = "boxctl-broker"
	// AdminName is the Service of the admin API.
	AdminName = "boxctl-broker-admin"
	BoxPort   = 8080
	AdminPort = 9443
	// CertsDir is where the pod mounts the server certificates.
	CertsDir = "/etc/boxctl-broker/tls"
	// ReplicaDir holds the replica of the boxes' events.
	ReplicaDir = "/var/lib/boxctl-broker"
	uid        = 65532
)

// Options are what the manifest is made of.
type Options struct {
	// Namespace of every object. Required.
	Namespace string
	// Image of the broker (Image pushes one). Required.
	Image string
	// CertsSecret holds the server directory of boxctl broker certs
	// (ca.crt, tls.crt, tls.key). Required.
	CertsSecret string
	// KeysSecret, when set, holds upstream keys as environment
	// variables (TANGLE_ROUTER_URL and TANGLE_API_KEY,
	// ANTHROPIC_API_KEY, ...): the broker holds them from its start.
	KeysSecret string
}

// Labels select the broker's pods.
func Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/component": "credential-broker"}
}

func (o Options) check() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %v", o.Namespace, msgs))
	}
	if msgs := validation.IsDNS1123Subdomain(o.CertsSecret); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("certs secret %q: %v", o.CertsSecret, msgs))
	}
	if o.KeysSecret != "" {
		if msgs := validation.IsDNS1123Subdomain(o.KeysSecret); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("keys secret %q: %v", o.KeysSecret, msgs))
		}
	}
	if o.Image == "" {
		errs = append(errs, errors.New("an image is required (boxctl broker image pushes one)"))
	}
	return errors.Join(errs...)
}

// Manifest renders the broker's objects as YAML documents for kubectl
// apply: a ServiceAccount without a token, the Service boxes reach (port
// 80), the admin API's Service (AdminPort, mutual TLS), and a Deployment
// of one pod (the broker keeps its grants in memory: one replica, and
// Recreate), non-root, read-only, without capabilities. The broker tells
// boxes its Service's cluster address, from the variables Kubernetes
// gives the pod for the Services before it.
func Manifest(o Options) ([]byte, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("brokerkube: %w", err)
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: Labels()}
	}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(Name),
		AutomountServiceAccountToken: new(false)}
	svc := func(name, port string, n int32) *corev1.Service {
		return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta(name),
			Spec: corev1.ServiceSpec{Selector: Labels(), Ports: []corev1.ServicePort{{Name: port, Protocol: corev1.ProtocolTCP,
				Port: n, TargetPort: intstr.FromString(port)}}}}
	}
	boxes, admin := svc(Name, "boxes", 80), svc(AdminName, "admin", AdminPort)
	c := corev1.Container{
		Name:  "broker",
		Image: o.Image,
		Args: []string{"broker", "--listen", fmt.Sprintf(":%d", BoxPort), "--admin-listen", fmt.Sprintf(":%d", AdminPort),
			"--certs", CertsDir, "--idle", "0", "--replica-dir", ReplicaDir,
			// Kubernetes gives the pod BOXCTL_BROKER_SERVICE_HOST and
			// _PORT for the Service named boxctl-broker.
			"--box-url", "http://$(BOXCTL_BROKER_SERVICE_HOST):$(BOXCTL_BROKER_SERVICE_PORT)"},
		Ports: []corev1.ContainerPort{{Name: "boxes", ContainerPort: BoxPort, Protocol: corev1.ProtocolTCP},
			{Name: "admin", ContainerPort: AdminPort, Protocol: corev1.ProtocolTCP}},
		VolumeMounts:   []corev1.VolumeMount{{Name: "tls", MountPath: CertsDir, ReadOnly: true}, {Name: "replica", MountPath: ReplicaDir}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("boxes")}}, PeriodSeconds: 5},
		LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("admin")}}, PeriodSeconds: 20},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), ReadOnlyRootFilesystem: new(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}
	if o.KeysSecret != "" {
		c.Args = append(c.Args, "--upstreams-from-env")
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.KeysSecret}}}}
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(Name),
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: Labels()},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: Labels()},
				Spec: corev1.PodSpec{
					ServiceAccountName:           Name,
					AutomountServiceAccountToken: new(false),
					EnableServiceLinks:           new(true),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(uid)),
						RunAsGroup: new(int64(uid)), FSGroup: new(int64(uid)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{c},
					Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: o.CertsSecret, DefaultMode: new(int32(0o440))}}},
						// The replica of the boxes' events (at most 1 GiB,
						// replica.DefaultMaxTotalBytes): past the
						// container's restarts, not the pod's.
						{Name: "replica", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: new(resource.MustParse("2Gi"))}}}},
				},
			},
		},
	}
	var buf bytes.Buffer
	for i, obj := range []any{sa, boxes, admin, dep} {
		b, err := specOnly(obj)
		if err != nil {
			return nil, fmt.Errorf("brokerkube: %w", err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// specOnly is obj as YAML without its status, which is the cluster's to
// write.
func specOnly(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	return yaml.Marshal(m)
}
