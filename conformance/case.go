package conformance

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Outcome is how a case ended for one harness.
type Outcome string

// Outcomes.
const (
	Pass          Outcome = "pass"
	Fail          Outcome = "fail"
	NotApplicable Outcome = "not_applicable"
)

// Evidence is what a failed case saw: the request it made, what came
// back, and what it expected.
type Evidence struct {
	Request string `json:"request"`
	Got     string `json:"got"`
	Want    string `json:"want"`
}

// String renders the evidence on three lines.
func (e Evidence) String() string {
	return "request: " + e.Request + "\ngot:     " + e.Got + "\nwant:    " + e.Want
}

// Failure is the error a case returns when a check fails.
type Failure struct {
	Evidence Evidence
	// Err is the error that came back, when one did.
	Err error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s: got %s, want %s", f.Evidence.Request, f.Evidence.Got, f.Evidence.Want)
}

// Unwrap returns the error that came back.
func (f *Failure) Unwrap() error { return f.Err }

// failErr returns a *Failure whose evidence is the error err.
func failErr(request, want string, err error) error {
	return &Failure{Evidence: Evidence{Request: request, Got: err.Error(), Want: want}, Err: err}
}

// failf returns a *Failure; got is formatted with args.
func failf(request, want, got string, args ...any) error {
	return &Failure{Evidence: Evidence{Request: request, Got: fmt.Sprintf(got, args...), Want: want}}
}

// Skip is the error a case returns when it does not apply: Capability
// names the capability (or input) whose absence makes it so.
type Skip struct {
	Capability string
	Reason     string
}

func (s *Skip) Error() string { return "not applicable: " + s.Capability + ": " + s.Reason }

func skip(capability, reason string) error { return &Skip{Capability: capability, Reason: reason} }

// DefaultCaseTimeout is a case's deadline when neither the case nor
// Options says otherwise.
const DefaultCaseTimeout = 4 * time.Minute

// Case is one named check of the suite.
type Case struct {
	// ID names the case: group.name, e.g. "control.cancel".
	ID string
	// Description says in one line what passing proves.
	Description string
	// Timeout bounds the case; zero means Options.CaseTimeout.
	Timeout time.Duration
	run     func(c *caseCtx) error
}

// Group returns the part of the id before the dot: provider, session,
// control, interactions, box or security.
func (c Case) Group() string {
	g, _, _ := strings.Cut(c.ID, ".")
	return g
}

// Cases returns the catalogue, in the order results are reported.
func Cases() []Case {
	var out []Case
	for _, group := range [][]Case{providerCases(), sessionCases(), controlCases(), interactionCases(), boxCases(), securityCases()} {
		out = append(out, group...)
	}
	return out
}

// Catalogue returns the chaos family or the catalogue of Cases.
func Catalogue(chaos bool) []Case {
	if chaos {
		return chaosCases()
	}
	return Cases()
}

// Select returns the cases of the catalogue that patterns name, in
// catalogue order: an exact id, a group ("session"), or a path.Match
// pattern ("control.*", "*.cancel"). No patterns selects every case; a
// pattern that matches nothing is an error naming the known ids.
func Select(patterns []string) ([]Case, error) { return SelectFrom(Cases(), patterns) }

// SelectFrom is Select over the cases all.
func SelectFrom(all []Case, patterns []string) ([]Case, error) {
	if len(patterns) == 0 {
		return all, nil
	}
	chosen := map[string]bool{}
	var errs []error
	for _, p := range patterns {
		n := 0
		for _, c := range all {
			ok, err := path.Match(p, c.ID)
			if err != nil {
				return nil, fmt.Errorf("case pattern %q: %w", p, err)
			}
			if ok || c.Group() == p {
				chosen[c.ID] = true
				n++
			}
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("no case matches %q", p))
		}
	}
	if len(errs) > 0 {
		ids := make([]string, len(all))
		for i, c := range all {
			ids[i] = c.ID
		}
		return nil, fmt.Errorf("%w (cases: %s)", errors.Join(errs...), strings.Join(ids, ", "))
	}
	return slices.DeleteFunc(all, func(c Case) bool { return !chosen[c.ID] }), nil
}
