package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Standby pods. A pool whose pods run the standby bridge from their start
// needs no exec at claim: the claim is agent-sandbox's SandboxClaim and
// one POST /v1/claim over the box's endpoint.
//
// The pool token reaches the bridge on its stdin. A template is shared by
// every pod of a warm pool, so the token is the pool's (one per pool,
// rotated with the pool), not the box's; it is in the API server as a
// Secret, never in the pod spec, the template or an env var. Only an init
// container mounts the Secret: it copies the token to a memory volume,
// and the box's own container opens that file as the bridge's stdin and
// removes it before the bridge starts, so nothing in a claimed box can
// read the token any more; and it dies in each box at its claim (the
// bridge refuses a second claim). Reading the Secret needs the rights
// that exec into the pods needs already, so it grants nothing new.

// StandbyTokenKey is the key of the pool token in a standby Secret.
const StandbyTokenKey = "pool-token"

// Where the token is in a standby pod: the Secret's volume (the init
// container's only) and the memory volume it is copied to.
const (
	standbySecretDir    = "/run/boxctl-pool-secret"
	standbyTokenDir     = "/run/boxctl-pool"
	standbySecretVolume = "pool-secret"
	standbyTokenVolume  = "pool-token"
	standbyInit         = "pool-token"
)

// HarnessAnnotation marks the SandboxTemplate of a standby pool with the
// harness its bridges serve; a template without it is a plain pool's.
const HarnessAnnotation = boxmeta.LabelPrefix + "standby-harness"

// StandbySecret is the name of the Secret of the standby pool name.
func StandbySecret(pool string) string { return pool + "-pool-token" }

// standbyPodSpec turns a box's pod spec into one that runs the standby
// bridge from its start under the image's init (its arguments, not its
// entrypoint), its pool token read as its stdin from the file an init
// container copied from the Secret, and ready once the bridge answers
// /health in standby.
func standbyPodSpec(base corev1.PodSpec, s vendors.PoolStandby, secret string) corev1.PodSpec {
	ps := *base.DeepCopy()
	mode := int32(0o444)
	ps.Volumes = append(ps.Volumes,
		corev1.Volume{Name: standbySecretVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: &mode,
				Items: []corev1.KeyToPath{{Key: StandbyTokenKey, Path: StandbyTokenKey}}},
		}},
		corev1.Volume{Name: standbyTokenVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(1<<16, resource.BinarySI)},
		}})
	c := &ps.Containers[0]
	tokenFile := standbyTokenDir + "/" + StandbyTokenKey
	ps.InitContainers = append(ps.InitContainers, corev1.Container{
		Name: standbyInit, Image: c.Image, ImagePullPolicy: c.ImagePullPolicy,
		Command: []string{"sh", "-c", `umask 077 && cat "$0" > "$1"`, standbySecretDir + "/" + StandbyTokenKey, tokenFile},
		VolumeMounts: []corev1.VolumeMount{
			{Name: standbySecretVolume, MountPath: standbySecretDir, ReadOnly: true},
			{Name: standbyTokenVolume, MountPath: standbyTokenDir},
		},
		Resources:       c.Resources,
		SecurityContext: c.SecurityContext.DeepCopy(),
	})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: standbyTokenVolume, MountPath: standbyTokenDir})
	c.Args = []string{"sh", "-c", `exec 0<"$0" && rm -f "$0" && exec box-bridge --standby`, tokenFile}
	c.WorkingDir = s.Dir
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: s.Env[k]})
	}
	if s.Port > 0 {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: int32(s.Port), Protocol: corev1.ProtocolTCP})
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt(s.Port)}},
			PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 3,
		}
	}
	return ps
}

// ensureStandbySecret makes the pool's Secret with a new random token
// when it is missing; an existing one keeps its token (its pods read it).
func (v *Vendor) ensureStandbySecret(ctx context.Context, pool string) error {
	secrets := v.core.CoreV1().Secrets(v.ns)
	name := StandbySecret(pool)
	if _, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: pool %s: secret: %w", pool, err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{boxmeta.LabelManaged: "true", boxmeta.LabelPool: pool}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{StandbyTokenKey: []byte(hex.EncodeToString(raw))},
	}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes: pool %s: secret: %w", pool, err)
	}
	return nil
}

// standbyToken reads the pool token of the standby pool.
func (v *Vendor) standbyToken(ctx context.Context, pool string) (string, error) {
	s, err := v.core.CoreV1().Secrets(v.ns).Get(ctx, StandbySecret(pool), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("kubernetes: pool %s: secret: %w", pool, err)
	}
	tok := string(s.Data[StandbyTokenKey])
	if tok == "" {
		return "", fmt.Errorf("kubernetes: pool %s: secret %s has no %s", pool, s.Name, StandbyTokenKey)
	}
	return tok, nil
}

var _ vendors.StandbyPooler = (*Vendor)(nil)

// ClaimStandby claims a box of the warm pool spec.Pool, else WithWarmPool's,
// when that pool is a standby pool of harness and spec asks for its image
// and nothing its pods were not started with: a SandboxClaim, whose
// Sandbox and claim end at spec's Lifetime from now, and the pool token
// from the pool's Secret, once the adopted Sandbox's pod is ready (the
// Sandbox's Ready condition of the generation the claim made may follow a
// moment later). The box's bridge waits for
// its claim. See vendors.StandbyPooler.
func (v *Vendor) ClaimStandby(ctx context.Context, spec vendors.CreateSpec, harness string) (vendors.Box, string, bool, error) {
	pools := v.poolsFor(spec)
	if len(pools) == 0 {
		return nil, "", false, nil
	}
	if err := vendors.Check(v, spec); err != nil {
		return nil, "", false, err
	}
	if err := checkSpec(spec); err != nil {
		return nil, "", false, &vendors.SpecError{Vendor: Name, Err: err}
	}
	if err := v.checkAPI(ctx, groupAgents, groupExtensions); err != nil {
		return nil, "", false, err
	}
	pool := ""
	for _, p := range pools {
		t, err := v.poolTemplate(ctx, p)
		if err != nil {
			return nil, "", false, err
		}
		if t.image == spec.Image && t.harness != "" && t.harness == harness {
			pool = p
			break
		}
	}
	if pool == "" {
		return nil, "", false, nil
	}
	tokc := make(chan error, 1)
	var token string
	go func() {
		var err error
		token, err = v.standbyToken(ctx, pool)
		tokc <- err
	}()
	now := time.Now()
	tag, err := vendors.Tag(Name, spec, now, v.o.version)
	if err != nil {
		<-tokc
		return nil, "", true, err
	}
	meta, err := objectMeta(boxName(spec.RunTag), tag.Labels)
	if err != nil {
		<-tokc
		return nil, "", true, err
	}
	// A standby pod is ready once its bridge answers: that is the box the
	// caller wants, before the Sandbox says Ready too.
	b, err := v.claimPool(ctx, pool, meta, metav1.NewTime(now.Add(spec.Lifetime)), true)
	if terr := <-tokc; err == nil && terr != nil {
		err = v.failCreate(ctx, b, terr)
	}
	if err != nil {
		return nil, "", true, err
	}
	return b, token, true, nil
}
