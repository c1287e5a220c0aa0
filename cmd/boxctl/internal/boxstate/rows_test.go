package boxstate

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

func TestState_Rows(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	owner := "user:ann"
	st := &State{Boxes: []Record{
		{ID: "known-box-0001", Target: "docker", RunTag: "run-a", Reference: &sandbox.Reference{Harness: "claude-code", Continues: []string{"lost-box-0004"}}},
		{ID: "gone-box-00002", Target: "docker", RunTag: "run-g", Created: now.Add(-time.Hour), Deadline: now.Add(-time.Minute),
			Reference: &sandbox.Reference{Harness: "pi"}},
		{ID: "lost-box-0004", Target: "docker", RunTag: "run-l", Created: now.Add(-time.Hour), Deadline: now.Add(time.Hour)},
		{RunTag: "run-pending", Target: "docker"},
	}}
	infos := []vendors.Info{
		{ID: "other-box-0003", State: vendors.StateRunning, Created: now.Add(-2 * time.Minute), Deadline: now.Add(time.Hour),
			Labels: map[string]string{boxmeta.LabelRunTag: "run-o", boxmeta.LabelOwner: "pid:h:1:2"}},
		{ID: "known-box-0001", State: vendors.StateRunning, Created: now.Add(-time.Minute), Deadline: now.Add(30 * time.Minute),
			Labels: map[string]string{boxmeta.LabelRunTag: "run-a", boxmeta.LabelOwner: owner}},
	}
	rows := st.Rows("docker", owner, infos)
	want := []Row{
		{ID: "known-box-0001", State: "running", RunTag: "run-a", Owner: owner, Created: now.Add(-time.Minute),
			Deadline: now.Add(30 * time.Minute), Harness: "claude-code", InState: true, Continues: "lost-box-0004"},
		{ID: "other-box-0003", State: "running", RunTag: "run-o", Owner: "pid:h:1:2", Created: now.Add(-2 * time.Minute),
			Deadline: now.Add(time.Hour)},
		{ID: "gone-box-00002", State: StateGone, RunTag: "run-g", Owner: owner, Created: now.Add(-time.Hour),
			Deadline: now.Add(-time.Minute), Harness: "pi", InState: true},
		{ID: "lost-box-0004", State: StateLost, RunTag: "run-l", Owner: owner, Created: now.Add(-time.Hour),
			Deadline: now.Add(time.Hour), InState: true},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("Rows (-want +got):\n%s", diff)
	}
}

func TestCollected_Err(t *testing.T) {
	res := Collected{
		Removed:   []Entry{{ID: "aaaaaaaaaaaa01", RunTag: "run-r", Reason: reaper.ReasonExpired}, {ID: "bbbbbbbbbbbb02", RunTag: "run-x", Reason: reaper.ReasonOwnerGone, Error: "busy"}},
		Forgotten: []Entry{{RunTag: "run-p", Reason: ReasonNeverCreate}},
		Suspended: []Entry{{ID: "cccccccccccc03", RunTag: "run-i", Reason: "idle for 3s (its threshold 3s)"}, {ID: "dddddddddddd04", RunTag: "run-j", Reason: "idle for 9s (its threshold 5s)", Error: "stuck"}},
	}
	err := res.Err()
	if err == nil || !strings.Contains(err.Error(), "box bbbbbbbbbbbb not removed: busy") || !strings.Contains(err.Error(), "box dddddddddddd not suspended: stuck") {
		t.Errorf("Err() = %v, want the failed remove and the failed suspend", err)
	}
	if err := (Collected{Removed: res.Removed[:1], Suspended: res.Suspended[:1]}).Err(); err != nil {
		t.Errorf("Err() of a collect without failures = %v", err)
	}
}
