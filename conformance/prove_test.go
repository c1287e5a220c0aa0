package conformance_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/pins"
)

// greenReport is a report of the whole catalogue passing for harness on
// docker.
func greenReport(t *testing.T, p *pins.Pins, harness string) *conformance.Report {
	t.Helper()
	h, _ := p.Harness(harness)
	rep := &conformance.Report{Vendor: "docker", Image: "boxctl-box:b1", ImageDigest: "sha256:" + strings.Repeat("12", 32),
		Router: "local", Boxctl: "v1.2.3", StartedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		Harnesses: []conformance.HarnessRun{{Name: h.Name, Version: h.Version}}}
	for _, c := range conformance.Cases() {
		rep.Results = append(rep.Results, conformance.Result{Case: c.ID, Harness: h.Name, Outcome: conformance.Pass})
	}
	rep.Summary.Pass = len(rep.Results)
	return rep
}

func TestProofFor(t *testing.T) {
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep := greenReport(t, p, "claude-code")
	proof, err := conformance.ProofFor(rep, "claude", p)
	if err != nil {
		t.Fatalf("ProofFor(green report) = %v", err)
	}
	want := pins.Proof{Vendor: "docker", ImageDigest: rep.ImageDigest, Image: rep.Image, Cases: len(conformance.Cases()),
		ProvenAt: rep.StartedAt, Boxctl: "v1.2.3"}
	if proof != want {
		t.Errorf("ProofFor = %+v, want %+v", proof, want)
	}
	if _, err := p.Prove("claude-code", proof); err != nil {
		t.Errorf("Prove(ProofFor(...)) = %v", err)
	}

	tests := []struct {
		name   string
		edit   func(r *conformance.Report)
		reason string
	}{
		{"emulator", func(r *conformance.Report) { r.Emulated = true }, "emulator of docker"},
		{"no digest", func(r *conformance.Report) { r.ImageDigest = "" }, "names no image digest"},
		{"a case failed", func(r *conformance.Report) { r.Results[3].Outcome = conformance.Fail }, "cases failed: " + conformance.Cases()[3].ID},
		{"a case missing", func(r *conformance.Report) { r.Results = r.Results[1:] }, "cases did not run: " + conformance.Cases()[0].ID},
		{"another version", func(r *conformance.Report) { r.Harnesses[0].Version = "0.0.1" }, "ran claude-code 0.0.1"},
		{"another harness", func(r *conformance.Report) { r.Harnesses[0].Name = "pi" }, "did not run for claude-code"},
		{"no live turn", func(r *conformance.Report) {
			for i := range r.Results {
				if r.Results[i].Case == "provider.turn" {
					r.Results[i].Outcome = conformance.NotApplicable
				}
			}
		}, "no live turn completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := greenReport(t, p, "claude-code")
			tt.edit(r)
			_, err := conformance.ProofFor(r, "claude-code", p)
			if !errors.Is(err, conformance.ErrNotProven) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("ProofFor = %v, want ErrNotProven naming %q", err, tt.reason)
			}
		})
	}
}
