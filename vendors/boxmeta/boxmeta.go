// Package boxmeta holds the names every part of boxctl uses to describe a
// box: the labels a vendor puts on it (and the reaper and `boxctl gc`
// select by), their values' encodings, and the lifetime variables and
// deadline file the image's init reads. It is their one home: the image
// renderer, the vendors, the reaper and the sandbox provider import these
// names, and none of them spells the strings itself. It is public so that
// a vendor written outside this module labels its boxes as every vendor
// does (vendors.Labels and vendors.Tag write these labels).
package boxmeta

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Label keys carried by every box.
const (
	// LabelPrefix starts every boxctl box label.
	LabelPrefix = "io.github.tangle-network.boxctl.box."
	// LabelManaged marks a box boxctl created ("true"); List and gc select
	// on it.
	LabelManaged = LabelPrefix + "managed"
	// LabelRunTag is the run tag: one caller's boxes, removable together.
	LabelRunTag = LabelPrefix + "run"
	// LabelOwner names the process or state that owns the box (in
	// vendors/reaper's owner encoding); gc removes boxes whose owner is
	// gone.
	LabelOwner = LabelPrefix + "owner"
	// LabelDeadline is the box's end, in Unix seconds.
	LabelDeadline = LabelPrefix + "deadline"
	// LabelVersion is the boxctl version that created the box.
	LabelVersion = LabelPrefix + "version"
	// LabelCreate is a token unique to one Vendor.Create call (set by
	// vendors.Tag), on vendors whose create may succeed although its
	// answer was lost: a vendor that retries finds the box of an earlier
	// attempt by it before trying again, so a retry never makes a second
	// box.
	LabelCreate = LabelPrefix + "create"
	// LabelPorts lists the ports a box exposes (CreateSpec.Ports, as
	// FormatPorts writes them), on vendors that reach any port of a box, so that the
	// vendor refuses the others as every vendor does.
	LabelPorts = LabelPrefix + "ports"
	// LabelPool names the warm pool a standby box was booted for; its
	// owner is the pool's keeper until a claim records it in a state.
	LabelPool = LabelPrefix + "pool"
	// LabelEgress is the box's egress policy at its creation, as
	// egress.Policy.Summary renders it ("open", "deny", "deny+RULES");
	// absent on a box created without one.
	LabelEgress = LabelPrefix + "egress"
)

// Lifetime variables read by the image's init (box-init).
const (
	// EnvDeadline is the absolute end of the box, in Unix seconds; the
	// vendor sets it at create.
	EnvDeadline = "BOX_DEADLINE"
	// EnvLifetime is the box's lifetime in seconds from its start; the
	// image sets a default.
	EnvLifetime = "BOX_LIFETIME"
	// EnvKillGrace separates SIGTERM from SIGKILL at the deadline, in
	// seconds.
	EnvKillGrace = "BOX_KILL_GRACE"
	// EnvDeadlineFile names the file box-init watches for a deadline
	// earlier than EnvDeadline (default DeadlineFile): a pooled box's
	// bridge writes its claim's deadline there.
	EnvDeadlineFile = "BOX_DEADLINE_FILE"
)

// DeadlineFile is where box-init looks for a moved deadline (Unix
// seconds) by default, checked every second.
const DeadlineFile = "/tmp/.boxctl/deadline"

// FormatDeadline renders a deadline as the value of LabelDeadline and
// EnvDeadline: Unix seconds, rounded up so a box never ends early.
func FormatDeadline(t time.Time) string {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return strconv.FormatInt(s, 10)
}

// ParseDeadline reads a LabelDeadline value.
func ParseDeadline(v string) (time.Time, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, fmt.Errorf("box deadline %q is not Unix seconds", v)
	}
	return time.Unix(n, 0), nil
}

// FormatPorts renders ports as the value of LabelPorts: the port numbers
// in increasing order, each once, comma separated ("" for none).
func FormatPorts(ports []int) string {
	ps := slices.Clone(ports)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// ParsePorts reads a LabelPorts value ("" is no port). A value that is not
// a list of TCP port numbers is an error.
func ParsePorts(v string) ([]int, error) {
	if v == "" {
		return nil, nil
	}
	var ps []int
	for _, f := range strings.Split(v, ",") {
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("box ports %q: %q is not a port number", v, f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}
