package pins

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Proof records a conformance run that proved a harness row: the suite
// ran green for the harness on a real box of Vendor, made from the image
// with ImageDigest.
type Proof struct {
	// Vendor is where the boxes ran (docker, e2b, daytona).
	Vendor string `json:"vendor" jsonschema:"pattern=^[a-z][a-z0-9-]*$"`
	// ImageDigest is the digest of the box image the suite ran on.
	ImageDigest string `json:"imageDigest" jsonschema:"pattern=^sha256:[0-9a-f]{64}$"`
	// Image is the image reference the boxes were made from, for people.
	Image string `json:"image,omitempty"`
	// Cases counts the cases that passed for the harness.
	Cases int `json:"cases" jsonschema:"minimum=1"`
	// ProvenAt is when the run started.
	ProvenAt time.Time `json:"provenAt"`
	// Boxctl is the version of boxctl that ran the suite.
	Boxctl string `json:"boxctl,omitempty"`
}

func (p Proof) validate() error {
	var errs []error
	if !nameRE.MatchString(p.Vendor) {
		errs = append(errs, fmt.Errorf("vendor %q: want a vendor name", p.Vendor))
	}
	if !digestRE.MatchString(p.ImageDigest) {
		errs = append(errs, fmt.Errorf("image digest %q: want sha256:<64 hex>", p.ImageDigest))
	}
	if p.Cases < 1 {
		errs = append(errs, errors.New("no case passed"))
	}
	if p.ProvenAt.IsZero() {
		errs = append(errs, errors.New("no time"))
	}
	return errors.Join(errs...)
}

// validateProofs checks a row's proofs: each well formed, one per vendor,
// and only on a proven row. (A row proven before proofs were recorded
// holds none.)
func (h Harness) validateProofs() error {
	var errs []error
	if !h.Proven && len(h.ProvenBy) > 0 {
		errs = append(errs, fmt.Errorf("%d proofs on a row that is not proven", len(h.ProvenBy)))
	}
	seen := map[string]bool{}
	for _, p := range h.ProvenBy {
		if err := p.validate(); err != nil {
			errs = append(errs, fmt.Errorf("proof on %s: %w", p.Vendor, err))
		}
		if seen[p.Vendor] {
			errs = append(errs, fmt.Errorf("two proofs on %s", p.Vendor))
		}
		seen[p.Vendor] = true
	}
	return errors.Join(errs...)
}

// Prove returns a copy of p with harness (a name or backend key) proven
// by proof, which replaces an earlier proof on the same vendor.
func (p *Pins) Prove(harness string, proof Proof) (*Pins, error) {
	if err := proof.validate(); err != nil {
		return nil, fmt.Errorf("prove %s: %w", harness, err)
	}
	out := p.Clone()
	h, ok := out.Harness(harness)
	if !ok {
		return nil, &UnknownHarnessError{Name: harness, Known: p.HarnessNames()}
	}
	h.ProvenBy = slices.DeleteFunc(slices.Clone(h.ProvenBy), func(q Proof) bool { return q.Vendor == proof.Vendor })
	h.ProvenBy = append(h.ProvenBy, proof)
	slices.SortFunc(h.ProvenBy, func(a, b Proof) int {
		if a.Vendor < b.Vendor {
			return -1
		}
		if a.Vendor > b.Vendor {
			return 1
		}
		return 0
	})
	h.Proven = true
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("prove %s: %w", harness, err)
	}
	return out, nil
}
