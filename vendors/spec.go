package vendors

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/egress"
)

// CreateSpec describes a box to create. Image, Lifetime and RunTag are
// required; every other zero value means "not asked for".
type CreateSpec struct {
	// Image is the box image reference (a vendor's template or snapshot
	// name where the vendor names images so).
	Image string
	// Lifetime bounds the box: it ends at most Lifetime after Create
	// starts. Required, positive and finite.
	Lifetime time.Duration
	// RunTag groups the boxes of one caller or run; gc and cleanup select
	// by it. Required.
	RunTag string
	// Owner names who owns the box, in vendors/reaper's encoding
	// (ProcessOwner, UserOwner, StateOwner); the box carries it as
	// boxmeta.LabelOwner. Empty means none recorded.
	Owner string
	// Labels are extra labels, carried beside the ones Labels sets. Check
	// refuses keys under boxmeta.LabelPrefix, but for boxmeta.LabelPool (a
	// standby box's pool) and boxmeta.LabelIdleSuspend (its idle
	// threshold, as boxmeta.FormatIdle writes it, on a box with a
	// Retention). A vendor refuses a key it cannot carry (Kubernetes: a
	// key that is not a qualified name).
	Labels map[string]string
	// Resources are the limits asked for; zero fields mean the vendor's
	// defaults.
	Resources Resources
	// Env is the box's environment, visible to every process in it and
	// in the vendor's description of the box: never put a secret here
	// (pass secrets to Box.Spawn).
	Env map[string]string
	// Ports are the TCP ports in the box to expose to the caller.
	Ports []int
	// Runtime is the runtime to run the box with: RuntimeGVisor, or a
	// name of the vendor's own (a Docker engine's runtime, e.g. "runsc";
	// a Kubernetes RuntimeClass); empty means the vendor's default.
	Runtime string
	// Retention makes the box suspendable (Suspender): Lifetime becomes
	// its active budget, and a suspended box is kept this long after each
	// suspend. Zero means not suspendable.
	Retention time.Duration
	// Pool names a warm pool of the vendor's own (WarmPools) to claim the
	// box from, when one of its boxes can serve the spec; else the box is
	// made as usual.
	Pool string
	// Egress is the box's egress policy; nil leaves the vendor's network
	// as it is (open). A policy that is not Open needs a vendor that
	// enforces it outside the box (FieldEgress).
	Egress *egress.Policy
}

// RuntimeGVisor asks for a box under gVisor (CreateSpec.Runtime): a
// kernel of its own between the box and the host's. The Docker vendor
// runs it with the engine's runsc runtime, the Kubernetes vendor under the
// RuntimeClass of this name.
const RuntimeGVisor = "gvisor"

// Resources are a box's limits.
type Resources struct {
	// CPUs is a CPU limit in cores (fractions allowed).
	CPUs float64
	// MemoryBytes is a memory limit.
	MemoryBytes int64
	// Pids is a limit on processes and threads.
	Pids int64
	// DiskBytes is a disk size.
	DiskBytes int64
}

// Or returns r with every field it leaves zero taken from defaults: a
// box's limits, where r is what its spec asks for and defaults the
// vendor's.
func (r Resources) Or(defaults Resources) Resources {
	if r.CPUs == 0 {
		r.CPUs = defaults.CPUs
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = defaults.MemoryBytes
	}
	if r.Pids == 0 {
		r.Pids = defaults.Pids
	}
	if r.DiskBytes == 0 {
		r.DiskBytes = defaults.DiskBytes
	}
	return r
}

// Field names a CreateSpec field a vendor may or may not honour.
type Field string

// Create fields.
const (
	FieldOwner   Field = "owner"
	FieldLabels  Field = "labels"
	FieldCPUs    Field = "resources.cpus"
	FieldMemory  Field = "resources.memory"
	FieldPids    Field = "resources.pids"
	FieldDisk    Field = "resources.disk"
	FieldEnv     Field = "env"
	FieldPorts   Field = "ports"
	FieldRuntime Field = "runtime"
	// FieldRetention is CreateSpec.Retention: a suspendable box.
	FieldRetention Field = "retention"
	// FieldPool is CreateSpec.Pool: a claim from the vendor's warm pool.
	FieldPool Field = "pool"
	// FieldEgress is CreateSpec.Egress, a policy that is not Open:
	// enforced outside the box.
	FieldEgress Field = "egress"
)

// Fields is a set of create fields.
type Fields map[Field]bool

// NewFields returns the set of fs.
func NewFields(fs ...Field) Fields {
	s := Fields{}
	for _, f := range fs {
		s[f] = true
	}
	return s
}

// Set returns the optional fields s asks for.
func (s CreateSpec) Set() []Field {
	var fs []Field
	add := func(f Field, set bool) {
		if set {
			fs = append(fs, f)
		}
	}
	add(FieldOwner, s.Owner != "")
	add(FieldLabels, len(s.Labels) > 0)
	add(FieldCPUs, s.Resources.CPUs != 0)
	add(FieldMemory, s.Resources.MemoryBytes != 0)
	add(FieldPids, s.Resources.Pids != 0)
	add(FieldDisk, s.Resources.DiskBytes != 0)
	add(FieldEnv, len(s.Env) > 0)
	add(FieldPorts, len(s.Ports) > 0)
	add(FieldRuntime, s.Runtime != "")
	add(FieldRetention, s.Retention != 0)
	add(FieldPool, s.Pool != "")
	add(FieldEgress, s.Egress != nil && !s.Egress.Open)
	return fs
}

// MaxLifetime is the longest lifetime any box may ask for.
const MaxLifetime = 7 * 24 * time.Hour

// MaxRetention is the longest a suspended box may be kept.
const MaxRetention = 30 * 24 * time.Hour

var runTagPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// Check validates spec and refuses every field v does not honour, before
// any call to v: the first refusal is an *UnsupportedError naming the
// field. It is what callers run before Vendor.Create, and what vendors run
// at its start.
func Check(v Vendor, spec CreateSpec) error {
	var errs []error
	if spec.Image == "" {
		errs = append(errs, errors.New("image is required"))
	}
	switch {
	case spec.Lifetime <= 0:
		errs = append(errs, errors.New("lifetime is required and must be positive: every box ends"))
	case spec.Lifetime > MaxLifetime:
		errs = append(errs, fmt.Errorf("lifetime %v is over the maximum %v", spec.Lifetime, MaxLifetime))
	case spec.Lifetime < time.Second:
		errs = append(errs, fmt.Errorf("lifetime %v is under a second", spec.Lifetime))
	}
	if !runTagPattern.MatchString(spec.RunTag) {
		errs = append(errs, fmt.Errorf("run tag %q: want 1-63 letters, digits, '_', '.', '-', starting with a letter or digit", spec.RunTag))
	}
	for k := range spec.Labels {
		if strings.HasPrefix(k, boxmeta.LabelPrefix) && k != boxmeta.LabelPool && k != boxmeta.LabelIdleSuspend {
			errs = append(errs, fmt.Errorf("label %q: keys under %s are reserved", k, boxmeta.LabelPrefix))
		}
	}
	if v, ok := spec.Labels[boxmeta.LabelIdleSuspend]; ok {
		if _, err := boxmeta.ParseIdle(v); err != nil {
			errs = append(errs, err)
		} else if spec.Retention == 0 {
			errs = append(errs, errors.New("an idle threshold needs a retention: only a suspendable box suspends when idle"))
		}
	}
	if spec.Retention < 0 || spec.Retention > MaxRetention {
		errs = append(errs, fmt.Errorf("retention %v: want up to %v", spec.Retention, MaxRetention))
	}
	if r := spec.Resources; r.CPUs < 0 || r.MemoryBytes < 0 || r.Pids < 0 || r.DiskBytes < 0 {
		errs = append(errs, errors.New("resources must not be negative"))
	}
	for _, p := range spec.Ports {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("port %d is not a TCP port", p))
		}
	}
	if spec.Egress != nil {
		if err := spec.Egress.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &SpecError{Vendor: v.Name(), Err: err}
	}
	supported := v.Supports()
	for _, f := range spec.Set() {
		if !supported[f] {
			return &UnsupportedError{Vendor: v.Name(), Field: f}
		}
	}
	return nil
}

// Labels returns every label a box of spec carries: spec.Labels plus
// boxmeta's, with the deadline computed from now.
func Labels(spec CreateSpec, now time.Time, version string) map[string]string {
	l := maps.Clone(spec.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[boxmeta.LabelManaged] = "true"
	l[boxmeta.LabelRunTag] = spec.RunTag
	l[boxmeta.LabelDeadline] = boxmeta.FormatDeadline(now.Add(spec.Lifetime))
	l[boxmeta.LabelVersion] = version
	if spec.Owner != "" {
		l[boxmeta.LabelOwner] = spec.Owner
	}
	if spec.Egress != nil {
		l[boxmeta.LabelEgress] = spec.Egress.Summary()
	}
	return l
}

// HasLabels reports whether have holds every pair of want: List's filter,
// for vendors that filter by themselves.
func HasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// SortedFields returns fs in a stable order, for messages.
func SortedFields(fs Fields) []Field {
	out := slices.Collect(maps.Keys(fs))
	slices.Sort(out)
	return out
}
