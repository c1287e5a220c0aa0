package pins_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/pins"
)

func proof(vendor string) pins.Proof {
	return pins.Proof{Vendor: vendor, ImageDigest: "sha256:" + strings.Repeat("0a", 32), Image: "boxctl-box:b1", Cases: 24,
		ProvenAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Boxctl: "v1.0.0"}
}

func TestPins_Prove(t *testing.T) {
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	proved, err := p.Prove("claude", proof("docker"))
	if err != nil {
		t.Fatalf("Prove(claude) = %v", err)
	}
	if h, _ := p.Harness("claude-code"); h.Proven || len(h.ProvenBy) != 0 {
		t.Error("Prove changed the pins it was given")
	}
	h, _ := proved.Harness("claude-code")
	if !h.Proven || len(h.ProvenBy) != 1 || h.ProvenBy[0] != proof("docker") {
		t.Fatalf("Prove(claude) row = proven %v by %+v, want proven by the docker proof", h.Proven, h.ProvenBy)
	}
	later := proof("docker")
	later.ImageDigest = "sha256:" + strings.Repeat("0b", 32)
	again, err := proved.Prove("claude-code", later)
	if err != nil {
		t.Fatal(err)
	}
	again, err = again.Prove("claude-code", proof("e2b"))
	if err != nil {
		t.Fatal(err)
	}
	h, _ = again.Harness("claude-code")
	if diff := cmp.Diff([]pins.Proof{later, proof("e2b")}, h.ProvenBy); diff != "" {
		t.Errorf("proofs after a second docker run and an e2b run (-want +got):\n%s", diff)
	}
	sel, err := again.Select(nil)
	if err != nil || len(sel) != 1 || sel[0].Name != "claude-code" {
		t.Errorf("Select(nil) after proving claude-code = %v, %v; want claude-code", sel, err)
	}

	// The data file keeps the proofs.
	dir := t.TempDir()
	if err := pins.Save(dir, again); err != nil {
		t.Fatal(err)
	}
	back, err := pins.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bh, _ := back.Harness("claude-code"); !cmp.Equal(bh.ProvenBy, h.ProvenBy) || !bh.Proven {
		t.Errorf("LoadDir(Save) proofs = %+v, want %+v", bh.ProvenBy, h.ProvenBy)
	}

	if _, err := p.Prove("no-such-cli", proof("docker")); err == nil {
		t.Error("Prove(unknown harness) succeeded")
	}
	bad := proof("docker")
	bad.ImageDigest = "latest"
	if _, err := p.Prove("pi", bad); err == nil || !strings.Contains(err.Error(), "image digest") {
		t.Errorf("Prove(proof without a digest) = %v, want an error naming the digest", err)
	}
}

func TestPins_ValidateProofs(t *testing.T) {
	p, err := pins.Load()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(h *pins.Harness)
		want   string
	}{
		{"a proof but not proven", func(h *pins.Harness) { h.ProvenBy = []pins.Proof{proof("docker")} }, "1 proofs on a row that is not proven"},
		{"two proofs on one vendor", func(h *pins.Harness) {
			h.Proven, h.ProvenBy = true, []pins.Proof{proof("docker"), proof("docker")}
		}, "two proofs on docker"},
		{"a proof without cases", func(h *pins.Harness) {
			pr := proof("docker")
			pr.Cases = 0
			h.Proven, h.ProvenBy = true, []pins.Proof{pr}
		}, "no case passed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := p.Clone()
			h, _ := c.Harness("pi")
			tt.mutate(h)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error holding %q", err, tt.want)
			}
		})
	}
}
