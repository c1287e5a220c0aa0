package kubernetes

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Standby pods. A pool whose pods run the standby bridge from their start
// needs no exec at claim: the claim is agent-sandbox's SandboxClaim and
// one POST /v1/claim over the box's endpoint.
//
// The pool token reaches the bridge on its stdin from a file of a Secret
// volume. A template is shared by every pod of a warm pool, so the token
// is the pool's (one per pool, rotated with the pool), not the box's; it
// is in the API server as a Secret, never in the pod spec, the template
// or an env var, and it dies in each box at its claim (the bridge refuses
// a second claim). Reading the Secret needs the rights that exec into the
// pods needs already, so it grants nothing new.

// StandbySpec is how a pool's pods start the standby bridge.
type StandbySpec struct {
	// Secret names the Secret holding the pool token under
	// StandbyTokenKey.
	Secret string
	// Env is the standby bridge's environment: nothing personal.
	Env map[string]string
	// Dir is the bridge's working directory.
	Dir string
}

// StandbyTokenKey is the key of the pool token in a standby Secret.
const StandbyTokenKey = "pool-token"

// standbyTokenDir is where the Secret volume is mounted in a standby pod.
const standbyTokenDir = "/run/boxctl-pool"

// standbyVolume is the name of the pool token's volume.
const standbyVolume = "pool-token"

// standbyPodSpec turns a box's pod spec into one that runs the standby
// bridge from its start, its pool token read from the Secret volume as
// its stdin.
func standbyPodSpec(base corev1.PodSpec, s StandbySpec) corev1.PodSpec {
	ps := *base.DeepCopy()
	mode := int32(0o400)
	ps.Volumes = append(ps.Volumes, corev1.Volume{Name: standbyVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: s.Secret, DefaultMode: &mode,
			Items: []corev1.KeyToPath{{Key: StandbyTokenKey, Path: StandbyTokenKey}}},
	}})
	c := &ps.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: standbyVolume, MountPath: standbyTokenDir, ReadOnly: true})
	c.Command = []string{"sh", "-c", `exec 0<"$0" && exec box-bridge --standby`, standbyTokenDir + "/" + StandbyTokenKey}
	c.WorkingDir = s.Dir
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	return ps
}
