package vendors_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

func TestTag(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := vendors.CreateSpec{Image: "img", RunTag: "run", Lifetime: time.Hour}
	tests := []struct {
		name      string
		env       map[string]string
		ports     []int
		wantErr   bool
		wantPorts string
	}{
		{name: "no env"},
		{name: "env and ports", env: map[string]string{"A": "1"}, ports: []int{8080}, wantPorts: boxmeta.FormatPorts([]int{8080})},
		{name: "deadline set", env: map[string]string{boxmeta.EnvDeadline: "x"}, wantErr: true},
		{name: "lifetime set", env: map[string]string{boxmeta.EnvLifetime: "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := base
			spec.Env, spec.Ports = tt.env, tt.ports
			tag, err := vendors.Tag("box", spec, now, "v1")
			if tt.wantErr {
				var se *vendors.SpecError
				if !errors.As(err, &se) || se.Vendor != "box" {
					t.Fatalf("err = %v, want a *SpecError of box", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tag.Token) != 26 || tag.Labels[boxmeta.LabelCreate] != tag.Token {
				t.Errorf("token %q, label %q", tag.Token, tag.Labels[boxmeta.LabelCreate])
			}
			if got := tag.Labels[boxmeta.LabelPorts]; got != tt.wantPorts {
				t.Errorf("ports label %q, want %q", got, tt.wantPorts)
			}
			deadline := boxmeta.FormatDeadline(now.Add(time.Hour))
			if tag.Labels[boxmeta.LabelDeadline] != deadline || tag.Env[boxmeta.EnvDeadline] != deadline {
				t.Errorf("deadline label %q, env %q, want %q", tag.Labels[boxmeta.LabelDeadline], tag.Env[boxmeta.EnvDeadline], deadline)
			}
			if len(tag.Env) != len(tt.env)+1 {
				t.Errorf("env %v, want %v and the deadline", tag.Env, tt.env)
			}
			if tt.env != nil && len(tt.env) == len(tag.Env) {
				t.Errorf("spec.Env was changed: %v", tt.env)
			}
		})
	}
}
