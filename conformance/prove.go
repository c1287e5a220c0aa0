package conformance

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/tangle-network/boxctl/pins"
)

// ErrNotProven is matched by every refusal of ProofFor.
var ErrNotProven = errors.New("the report does not prove the harness")

// digestRE is an image digest.
var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ProofFor checks that rep proves harness (a name or backend key of p) and
// returns the proof to record in the pins (pins.Pins.Prove). A report
// proves a harness when it ran on a real box (a vendor, not an emulator)
// from an image whose digest it names, for the version p pins, with every
// case of the catalogue present for the harness and none failed, and the
// live turn (provider.turn) passed. Each reason it does not is named in
// the error, which matches ErrNotProven.
func ProofFor(rep *Report, harness string, p *pins.Pins) (pins.Proof, error) {
	h, ok := p.Harness(harness)
	if !ok {
		return pins.Proof{}, fmt.Errorf("prove %s: %w", harness, pins.ErrUnknownHarness)
	}
	var why []string
	if rep.Emulated {
		why = append(why, fmt.Sprintf("it ran on an emulator of %s, not on a real box", rep.Vendor))
	}
	if !digestRE.MatchString(rep.ImageDigest) {
		why = append(why, "it names no image digest (run the suite with --build-record, or an --image pinned by digest)")
	}
	var run *HarnessRun
	for i := range rep.Harnesses {
		if rep.Harnesses[i].Name == h.Name {
			run = &rep.Harnesses[i]
		}
	}
	switch {
	case run == nil:
		why = append(why, "the suite did not run for "+h.Name)
	case run.Version != h.Version:
		why = append(why, fmt.Sprintf("it ran %s %s, and the pin is %s", h.Name, run.Version, h.Version))
	}
	results := map[string]Result{}
	for _, r := range rep.Results {
		if r.Harness == h.Name {
			results[r.Case] = r
		}
	}
	var missing, failed []string
	passed := 0
	for _, c := range Cases() {
		r, ok := results[c.ID]
		switch {
		case !ok:
			missing = append(missing, c.ID)
		case r.Outcome == Fail:
			failed = append(failed, c.ID)
		case r.Outcome == Pass:
			passed++
		}
	}
	if len(failed) > 0 {
		why = append(why, "cases failed: "+strings.Join(failed, ", "))
	}
	if len(missing) > 0 && run != nil {
		why = append(why, "cases did not run: "+strings.Join(missing, ", "))
	}
	if r, ok := results["provider.turn"]; run != nil && ok && r.Outcome != Pass {
		why = append(why, "no live turn completed (provider.turn is "+string(r.Outcome)+")")
	}
	if len(why) > 0 {
		return pins.Proof{}, fmt.Errorf("prove %s: %w: %s", h.Name, ErrNotProven, strings.Join(why, "; "))
	}
	return pins.Proof{Vendor: rep.Vendor, ImageDigest: rep.ImageDigest, Image: rep.Image, Cases: passed,
		ProvenAt: rep.StartedAt, Boxctl: rep.Boxctl}, nil
}
