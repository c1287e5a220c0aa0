package pins

import (
	"fmt"
	"strings"
)

// UnknownHarnessError is a harness name that matches no pinned harness. It
// matches ErrUnknownHarness with errors.Is.
type UnknownHarnessError struct {
	// Name is the name asked for.
	Name string
	// Known are the pinned harness names, in pins order.
	Known []string
}

func (e *UnknownHarnessError) Error() string {
	return fmt.Sprintf("%v %q (known: %s)", ErrUnknownHarness, e.Name, strings.Join(e.Known, ", "))
}

// Is makes the error match ErrUnknownHarness.
func (e *UnknownHarnessError) Is(target error) bool { return target == ErrUnknownHarness }

// MismatchError lists the pins that disagree with the npm registry. It
// matches ErrMismatch with errors.Is.
type MismatchError struct {
	// Failed are the failed checks, in pins order.
	Failed []Check
	// Total is how many packages were checked.
	Total int
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d pins disagree with the npm registry:", len(e.Failed), e.Total)
	for _, c := range e.Failed {
		fmt.Fprintf(&b, "\n  %s", c.describe())
	}
	return b.String()
}

// Is makes the error match ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// describe names the package, what differs and how to fix it.
func (c Check) describe() string {
	s := c.Subject + ": " + c.Package + "@" + c.Version
	if c.Platform != "" {
		s += " (" + c.Platform + ")"
	}
	s += ": " + c.Error
	if c.Registry != "" && c.Registry != c.Integrity {
		s += ": pinned " + c.Integrity + ", registry serves " + c.Registry
	}
	if c.Fix != "" {
		s += "; " + c.Fix
	}
	return s
}

// fix says how to settle a failed check of subject's package at version.
func fix(subject, version string, integrity bool) string {
	if subject == "node" {
		return "correct the node section of " + DataFile + " from the registry"
	}
	if integrity {
		// The same version with another tarball is a changed package, or
		// another registry than the pins came from: look before re-pinning.
		return fmt.Sprintf("check the registry (--registry, NPM_CONFIG_REGISTRY), then run `boxctl pins bump %s %s` to pin what it serves", subject, version)
	}
	return fmt.Sprintf("run `boxctl pins bump %s` to pin a published version, or point --registry at one that has it", subject)
}
