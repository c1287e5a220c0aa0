package boxmeta

import (
	"fmt"
	"time"
)

// Labels of a suspendable box (vendors.CreateSpec.Retention).
const (
	// LabelRetention is how long a suspended box is kept after each
	// suspend, in seconds; its presence marks the box suspendable.
	LabelRetention = LabelPrefix + "retention"
	// LabelForkOf is the id of the suspended box a fork was made from.
	LabelForkOf = LabelPrefix + "fork-of"
	// LabelIdleSuspend is how long the box's bridge may have no turn
	// before gc suspends the box (sandbox.Options.IdleSuspend), as
	// FormatIdle writes it.
	LabelIdleSuspend = LabelPrefix + "idle-suspend"
)

// FormatIdle renders an idle threshold as the value of LabelIdleSuspend:
// whole milliseconds, rounded up, in Go's duration syntax ("90s", "1.5s").
func FormatIdle(d time.Duration) string {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond).String()
}

// ParseIdle reads a LabelIdleSuspend value: a positive duration.
func ParseIdle(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("box idle threshold %q is not a positive duration", v)
	}
	return d, nil
}
