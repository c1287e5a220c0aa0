package boxmeta

// Labels of a suspendable box (vendors.CreateSpec.Retention).
const (
	// LabelRetention is how long a suspended box is kept after each
	// suspend, in seconds; its presence marks the box suspendable.
	LabelRetention = LabelPrefix + "retention"
	// LabelForkOf is the id of the suspended box a fork was made from.
	LabelForkOf = LabelPrefix + "fork-of"
)
