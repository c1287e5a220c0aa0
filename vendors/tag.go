package vendors

import (
	"fmt"
	"maps"
	"time"

	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Tagged is what a box made through a vendor's control plane carries.
type Tagged struct {
	// Labels are the box's labels (Labels), with its create token
	// (boxmeta.LabelCreate) and, when it has any, its ports
	// (boxmeta.LabelPorts).
	Labels map[string]string
	// Token is the create token, unique to the Create call (CreateToken).
	Token string
	// Env is spec.Env with the box's deadline (boxmeta.EnvDeadline).
	Env map[string]string
}

// Tag returns what a box of spec made now carries, after checking that
// spec.Env leaves the variables of the box's lifetime (boxmeta.EnvDeadline,
// boxmeta.EnvLifetime) to vendor: a *SpecError when it sets one.
func Tag(vendor string, spec CreateSpec, now time.Time, version string) (Tagged, error) {
	for k := range spec.Env {
		if k == boxmeta.EnvDeadline || k == boxmeta.EnvLifetime {
			return Tagged{}, &SpecError{Vendor: vendor, Err: fmt.Errorf("env %s is set from the lifetime", k)}
		}
	}
	t := Tagged{Labels: Labels(spec, now, version), Token: CreateToken(), Env: maps.Clone(spec.Env)}
	t.Labels[boxmeta.LabelCreate] = t.Token
	if len(spec.Ports) > 0 {
		t.Labels[boxmeta.LabelPorts] = boxmeta.FormatPorts(spec.Ports)
	}
	if t.Env == nil {
		t.Env = map[string]string{}
	}
	t.Env[boxmeta.EnvDeadline] = t.Labels[boxmeta.LabelDeadline]
	return t, nil
}
