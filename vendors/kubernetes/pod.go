package kubernetes

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// podSpec is the box's pod: the image's user, no privilege escalation,
// every capability dropped, the runtime's default seccomp profile, no
// service account token, and the limits asked for.
func (v *Vendor) podSpec(spec vendors.CreateSpec, deadline string) corev1.PodSpec {
	res := spec.Resources.Or(v.o.resources)
	env := []corev1.EnvVar{{Name: boxmeta.EnvDeadline, Value: deadline}}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	var ports []corev1.ContainerPort
	for _, p := range spec.Ports {
		ports = append(ports, corev1.ContainerPort{ContainerPort: int32(p), Protocol: corev1.ProtocolTCP})
	}
	ps := boxPodSpec(spec.Image, env, ports, v.resources(res), v.o.grace)
	if spec.Runtime != "" {
		ps.RuntimeClassName = &spec.Runtime
	}
	return ps
}

// boxPodSpec is the pod of a box, cold or in a warm pool.
func boxPodSpec(image string, env []corev1.EnvVar, ports []corev1.ContainerPort, res corev1.ResourceRequirements, grace int64) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  new(false),
		EnableServiceLinks:            new(false),
		TerminationGracePeriodSeconds: &grace,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   new(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Image:           image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Env:             env,
			Ports:           ports,
			Resources:       res,
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: new(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}},
	}
}

// resources turns limits into the container's limits and the vendor's
// requests (never above the limits).
func (v *Vendor) resources(limits vendors.Resources) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	if limits.CPUs > 0 {
		r.Limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(limits.CPUs*1000), resource.DecimalSI)
	}
	if limits.MemoryBytes > 0 {
		r.Limits[corev1.ResourceMemory] = *resource.NewQuantity(limits.MemoryBytes, resource.BinarySI)
	}
	if limits.DiskBytes > 0 {
		r.Limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(limits.DiskBytes, resource.BinarySI)
		// Without a request of its own the limit would be reserved whole.
		r.Requests[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(min(limits.DiskBytes, DefaultRequestDisk), resource.BinarySI)
	}
	if cpu := min(v.o.requests.CPUs, limits.CPUs); cpu > 0 {
		r.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(cpu*1000), resource.DecimalSI)
	}
	if mem := min(v.o.requests.MemoryBytes, limits.MemoryBytes); mem > 0 {
		r.Requests[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	return r
}
