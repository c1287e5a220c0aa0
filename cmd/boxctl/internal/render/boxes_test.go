package render_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"

	"github.com/google/go-cmp/cmp"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

func TestRows(t *testing.T) {
	now := time.Unix(1900000000, 0)
	tests := []struct {
		name, want string
		rows       []boxstate.Row
	}{
		{
			name: "known, unknown and gone boxes",
			rows: []boxstate.Row{
				{ID: "known-box-0001", State: "running", RunTag: "run-a", Owner: "user:ann", Created: now.Add(-time.Minute),
					Deadline: now.Add(30 * time.Minute), Harness: "claude-code", InState: true},
				{ID: "other-box-0003", State: "running", RunTag: "run-o", Owner: "pid:h:1:2", Created: now.Add(-2 * time.Minute),
					Deadline: now.Add(time.Hour)},
				{ID: "gone-box-00002", State: boxstate.StateGone, RunTag: "run-g", Owner: "user:ann", Created: now.Add(-time.Hour),
					Deadline: now.Add(-time.Minute), Harness: "pi", InState: true},
			},
			want: "ID             STATE    RUN TAG  OWNER      DEADLINE         HARNESS\n" +
				"known-box-00   running  run-a    user:ann   in 30m0s         claude-code\n" +
				"other-box-00*  running  run-o    pid:h:1:2  in 1h0m0s        -\n" +
				"gone-box-000   gone     run-g    user:ann   passed 1m0s ago  pi\n" +
				"* not in this user's state: turn cannot drive it; exec, logs and rm can\n",
		},
		{
			name: "no owner, no deadline: dashes, and no footnote",
			rows: []boxstate.Row{{ID: "b1", State: "running", RunTag: "run-b", InState: true}},
			want: "ID  STATE    RUN TAG  OWNER  DEADLINE  HARNESS\n" +
				"b1  running  run-b    -      -         -\n",
		},
		{name: "none", want: "no boxes\n"},
		{
			name: "with what the broker measured",
			rows: []boxstate.Row{{ID: "b1", State: "running", RunTag: "run-b", InState: true, Usage: &broker.Usage{Requests: 3, InputTokens: 1200, OutputTokens: 450}},
				{ID: "b2", State: "running", RunTag: "run-c", InState: true}},
			want: "ID  STATE    RUN TAG  OWNER  DEADLINE  HARNESS  MODEL USE\n" +
				"b1  running  run-b    -      -         -        3 requests, 1200 in / 450 out tokens\n" +
				"b2  running  run-c    -      -         -        -\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := render.Rows(&b, tt.rows, now); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("WriteRows wrote\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestCollected(t *testing.T) {
	res := boxstate.Collected{
		Removed:   []boxstate.Entry{{ID: "aaaaaaaaaaaa01", RunTag: "run-r", Reason: reaper.ReasonExpired}, {ID: "bbbbbbbbbbbb02", RunTag: "run-x", Reason: reaper.ReasonOwnerGone, Error: "busy"}},
		Forgotten: []boxstate.Entry{{RunTag: "run-p", Reason: boxstate.ReasonNeverCreate}},
		Suspended: []boxstate.Entry{{ID: "cccccccccccc03", RunTag: "run-i", Reason: "idle for 3s (its threshold 3s)"}, {ID: "dddddddddddd04", RunTag: "run-j", Reason: "idle for 9s (its threshold 5s)", Error: "stuck"}},
	}
	for _, tc := range []struct {
		dryRun bool
		want   string
	}{
		{false, `removed aaaaaaaaaaaa (run run-r): past its deadline
could not remove bbbbbbbbbbbb (run run-x, its owner is gone): busy
forgot a box being created (run run-p): its ` + "`boxctl up`" + ` never finished, and its lifetime is over
suspended cccccccccccc (run run-i): idle for 3s (its threshold 3s)
could not suspend dddddddddddd (run run-j, idle for 9s (its threshold 5s)): stuck
`},
		{true, `would remove aaaaaaaaaaaa (run run-r): past its deadline
could not remove bbbbbbbbbbbb (run run-x, its owner is gone): busy
would forget a box being created (run run-p): its ` + "`boxctl up`" + ` never finished, and its lifetime is over
would suspend cccccccccccc (run run-i): idle for 3s (its threshold 3s)
could not suspend dddddddddddd (run run-j, idle for 9s (its threshold 5s)): stuck
`},
	} {
		res.DryRun = tc.dryRun
		var b strings.Builder
		if err := render.Collected(&b, res); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, b.String()); diff != "" {
			t.Errorf("WriteCollected(dry run %v) (-want +got):\n%s", tc.dryRun, diff)
		}
	}
	var b strings.Builder
	if err := render.Collected(&b, boxstate.Collected{}); err != nil || b.String() != "nothing to collect\n" {
		t.Errorf("WriteCollected(nothing) = %q, %v", b.String(), err)
	}
}
