package reaper

import (
	"time"

	"github.com/tangle-network/boxctl/internal/boxmeta"
)

// Labels every boxctl box carries (vendors.Labels sets them at create).
// vendors.Info.RunTag and Info.Owner read the two a reaper decides by.
const (
	// LabelPrefix starts every boxctl box label; keys under it are
	// reserved.
	LabelPrefix = boxmeta.LabelPrefix
	// LabelManaged marks a box boxctl created ("true").
	LabelManaged = boxmeta.LabelManaged
	// LabelRunTag is the box's run tag: one caller's boxes, removable
	// together.
	LabelRunTag = boxmeta.LabelRunTag
	// LabelOwner is the box's owner (ProcessOwner, UserOwner).
	LabelOwner = boxmeta.LabelOwner
	// LabelDeadline is the box's end, in Unix seconds (FormatDeadline).
	LabelDeadline = boxmeta.LabelDeadline
)

// RunTagFilter is the vendors.Vendor.List filter of the boxes of run tag
// tag.
func RunTagFilter(tag string) map[string]string { return map[string]string{LabelRunTag: tag} }

// FormatDeadline renders a deadline as a LabelDeadline value: Unix
// seconds, rounded up so that a box never ends early.
func FormatDeadline(t time.Time) string { return boxmeta.FormatDeadline(t) }

// ParseDeadline reads a LabelDeadline value.
func ParseDeadline(v string) (time.Time, error) { return boxmeta.ParseDeadline(v) }
