package kubernetes

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestStandbyPodSpec(t *testing.T) {
	const token = "tok-0123456789abcdef"
	base := boxPodSpec("img:1", []corev1.EnvVar{{Name: "BOX_LIFETIME", Value: "60"}}, nil, corev1.ResourceRequirements{}, 5)
	ps := standbyPodSpec(base, StandbySpec{Secret: "pool-a", Env: map[string]string{"B": "2", "A": "1"}, Dir: "/home/box/workspace"})
	raw, err := json.Marshal(ps)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), token) {
		t.Fatal("the pod spec holds the token")
	}
	if len(base.Volumes) != 0 || base.Containers[0].Command != nil {
		t.Fatal("the base spec was changed")
	}
	c := ps.Containers[0]
	tests := []struct {
		name string
		ok   bool
	}{
		{"secret volume", len(ps.Volumes) == 1 && ps.Volumes[0].Secret != nil && ps.Volumes[0].Secret.SecretName == "pool-a"},
		{"read-only mount", len(c.VolumeMounts) == 1 && c.VolumeMounts[0].ReadOnly && c.VolumeMounts[0].MountPath == standbyTokenDir},
		{"standby bridge on stdin", len(c.Command) == 4 && strings.Contains(c.Command[2], "box-bridge --standby") && c.Command[3] == standbyTokenDir+"/"+StandbyTokenKey},
		{"env sorted after base", len(c.Env) == 3 && c.Env[0].Name == "BOX_LIFETIME" && c.Env[1].Name == "A" && c.Env[2].Name == "B"},
		{"no env from the secret", func() bool {
			for _, e := range c.Env {
				if e.ValueFrom != nil {
					return false
				}
			}
			return true
		}()},
		{"dir", c.WorkingDir == "/home/box/workspace"},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: %+v", tt.name, ps)
		}
	}
}
