package kubernetes

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/vendors"
	corev1 "k8s.io/api/core/v1"
)

func TestStandbyPodSpec(t *testing.T) {
	base := boxPodSpec("img:1", []corev1.EnvVar{{Name: "BOX_LIFETIME", Value: "60"}}, nil, corev1.ResourceRequirements{}, 5)
	ps := standbyPodSpec(base, vendors.PoolStandby{Env: map[string]string{"B": "2", "A": "1"}, Dir: "/home/box/workspace", Port: 8080}, "pool-a")
	raw, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Volumes) != 0 || base.Containers[0].Args != nil || base.InitContainers != nil {
		t.Fatal("the base spec was changed")
	}
	c := ps.Containers[0]
	mounts := func(c corev1.Container) []string {
		var out []string
		for _, m := range c.VolumeMounts {
			out = append(out, m.Name)
		}
		return out
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"secret and memory volumes", len(ps.Volumes) == 2 && ps.Volumes[0].Secret != nil && ps.Volumes[0].Secret.SecretName == "pool-a" &&
			ps.Volumes[1].EmptyDir != nil && ps.Volumes[1].EmptyDir.Medium == corev1.StorageMediumMemory},
		{"only the init container mounts the secret", len(ps.InitContainers) == 1 && slices.Equal(mounts(ps.InitContainers[0]), []string{standbySecretVolume, standbyTokenVolume}) &&
			slices.Equal(mounts(c), []string{standbyTokenVolume})},
		{"init copies the token", strings.Contains(strings.Join(ps.InitContainers[0].Command, " "), standbySecretDir+"/"+StandbyTokenKey)},
		{"entrypoint kept, standby bridge as its arguments", c.Command == nil && len(c.Args) == 4 && strings.Contains(c.Args[2], "box-bridge --standby") &&
			strings.Contains(c.Args[2], `rm -f "$0"`) && c.Args[3] == standbyTokenDir+"/"+StandbyTokenKey},
		{"env sorted after base", len(c.Env) == 3 && c.Env[0].Name == "BOX_LIFETIME" && c.Env[1].Name == "A" && c.Env[2].Name == "B"},
		{"no env from the secret", !strings.Contains(string(raw), "secretKeyRef")},
		{"ready on /health", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/health" && c.ReadinessProbe.HTTPGet.Port.IntValue() == 8080},
		{"dir", c.WorkingDir == "/home/box/workspace"},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: %+v", tt.name, ps)
		}
	}
}
