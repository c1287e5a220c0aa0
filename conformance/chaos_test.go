package conformance_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/vendors"
)

var (
	chaosFaults = flag.Int("chaos-faults", 2, "faults each chaos case injects in TestChaos_Live")
	chaosIdle   = flag.Duration("chaos-idle", time.Second, "idle bound of the chaos.idle proxy in TestChaos_Live")
	chaosRun    = flag.String("chaos-run", "", "chaos cases TestChaos_Live runs, comma separated (default: all)")
	chaosLanes  = flag.Int("chaos-lanes", 2, "turns streaming at once in each chaos case of TestChaos_Live")
)

// boxFaults are the chaos cases whose faults act on the box or its vendor.
// The others (a cut or idle connection, a replaced caller, and their mix)
// act between the client and the bridge's endpoint, the same HTTP on every
// vendor: Docker runs them.
var boxFaults = []string{"chaos." + conformance.FaultKill, "chaos." + conformance.FaultVendor,
	"chaos." + conformance.FaultSuspend, "chaos." + conformance.FaultBoxLost}

// TestChaos_Live runs the chaos family on every target for Claude Code
// (boxFaults but on Docker; small by default, -chaos-faults N for the
// full size) and checks that
// every case passed with its figures clean: faults injected, no event lost
// or repeated, every run terminal.
func TestChaos_Live(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			target := tg.make(t, w, boxtest.Options{Harnesses: allHarnesses})
			var cases []string
			switch {
			case *chaosRun != "":
				cases = strings.Split(*chaosRun, ",")
			case tg.name != "docker":
				cases = boxFaults
			}
			want, err := conformance.SelectFrom(conformance.Catalogue(true), cases)
			if err != nil {
				t.Fatal(err)
			}
			rep := run(t, target, conformance.Options{Harnesses: []string{"claude-code"}, Cases: cases,
				Chaos: &conformance.Chaos{Faults: *chaosFaults, Idle: *chaosIdle, Lanes: *chaosLanes}, Parallel: 1})
			if got, want := len(rep.Results), len(want); got != want {
				t.Errorf("%d results, want %d", got, want)
			}
			for _, res := range rep.Results {
				st := res.Chaos
				if res.Case == "chaos."+conformance.FaultVendor && target.Faults == nil && res.Outcome == conformance.NotApplicable {
					continue // no fault switch on its control plane: the emulators run it
				}
				if _, ok := target.Vendor.(vendors.Suspender); res.Case == "chaos."+conformance.FaultSuspend && !ok &&
					res.Outcome == conformance.NotApplicable {
					continue // the vendor (as the test wraps it) cannot suspend: Docker runs it
				}
				if res.Outcome != conformance.Pass || st == nil {
					t.Errorf("%s = %s:\n%s\ncleanup: %v\nnotes: %v", res.Case, res.Outcome, evidence(res), res.Cleanup, res.Notes)
					continue
				}
				t.Logf("%s %-6s faults %4d runs %4d events %6d lost %d dup %d leaked %d resumes %4d p50 %7.1f ms p99 %7.1f ms; %s",
					tg.name, st.Kind, st.Faults, st.Runs, st.Events, st.Lost, st.Duplicated, st.Leaked, st.Resumes, st.ResumeP50Ms, st.ResumeP99Ms,
					strings.Join(res.Notes, "; "))
				if st.Faults < *chaosFaults || st.Lost+st.Duplicated+st.Mismatched+st.Unfinished+st.Leaked != 0 || st.Events == 0 {
					t.Errorf("%s figures %+v, want at least %d faults, events checked, none lost, repeated, changed or unfinished, no box leaked", res.Case, *st, *chaosFaults)
				}
			}
		})
	}
}
