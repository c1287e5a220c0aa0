package boxstate

import (
	"slices"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Row is one box of a listing: a vendor's box, joined with its record
// when the state knows it, or a record whose box is gone.
type Row struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	RunTag   string    `json:"runTag"`
	Owner    string    `json:"owner,omitempty"`
	Created  time.Time `json:"created,omitzero"`
	Deadline time.Time `json:"deadline,omitzero"`
	Harness  string    `json:"harness,omitempty"`
	Image    string    `json:"image,omitempty"`
	// InState reports whether the state file knows the box (turn can
	// drive it).
	InState bool `json:"inState"`
	// Upstream names the box's upstream at the user's broker; Usage is
	// what the broker measured the box spend there (nil when the broker
	// does not run).
	Upstream string        `json:"upstream,omitempty"`
	Usage    *broker.Usage `json:"usage,omitempty"`
	// Egress is the box's egress policy (egress.Policy.Summary): as the
	// state last set it, else as the box's label recorded it at its
	// creation; empty for a box made without one.
	Egress string `json:"egress,omitempty"`
	// Continues is the lost box whose sessions this box continues
	// (turn --replace).
	Continues string `json:"continues,omitempty"`
}

// StateGone is the State of a Row whose box the vendor no longer has,
// past its deadline; StateLost one the vendor no longer has before its
// deadline: deleted behind boxctl's back, or its node gone (turn
// --replace continues its sessions on a new box).
const (
	StateGone = "gone"
	StateLost = "lost"
)

// Rows joins the vendor's boxes with the state's records of target: the
// boxes newest first, then the records whose boxes are gone (owned by
// owner, the state's owner).
func (st *State) Rows(target, owner string, infos []vendors.Info) []Row {
	rows := make([]Row, 0, len(infos))
	seen := map[string]bool{}
	for _, b := range infos {
		row := Row{ID: b.ID, State: string(b.State), RunTag: b.RunTag(), Owner: b.Owner(), Created: b.Created,
			Deadline: b.Deadline, Image: b.Image, Egress: b.Labels[boxmeta.LabelEgress]}
		if rec := st.Find(b.ID); rec != nil && rec.Target == target {
			row.InState, seen[b.ID], row.Upstream = true, true, rec.Upstream
			if rec.Reference != nil {
				row.Harness = rec.Reference.Harness
				if len(rec.Reference.Continues) > 0 {
					row.Continues = rec.Reference.Continues[0]
				}
			}
			if rec.Egress != nil {
				row.Egress = rec.Egress.Summary()
			}
		}
		rows = append(rows, row)
	}
	slices.SortStableFunc(rows, func(x, y Row) int { return y.Created.Compare(x.Created) })
	for _, rec := range st.Boxes {
		if rec.Pending() || rec.Target != target || seen[rec.ID] {
			continue
		}
		row := Row{ID: rec.ID, State: StateGone, RunTag: rec.RunTag, Owner: owner, Created: rec.Created,
			Deadline: rec.Deadline, Image: rec.Image, InState: true, Upstream: rec.Upstream}
		if rec.Deadline.After(time.Now()) {
			row.State = StateLost
		}
		if rec.Reference != nil {
			row.Harness = rec.Reference.Harness
		}
		if rec.Egress != nil {
			row.Egress = rec.Egress.Summary()
		}
		rows = append(rows, row)
	}
	return rows
}
