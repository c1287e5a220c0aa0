package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/invopop/jsonschema"

	"github.com/tangle-network/boxctl/internal/buildinfo"
)

// SchemaFile is the file name of the report's published JSON Schema, in
// this package's directory.
const SchemaFile = "report.schema.json"

// SchemaID is the $id of the published schema.
const SchemaID = "https://github.com/tangle-network/boxctl/conformance/report.schema.json"

// Report is the outcome of one run: what ran against what, and a result
// per case and harness.
type Report struct {
	// Schema names the JSON Schema of this document.
	Schema string `json:"$schema,omitempty"`
	// Vendor is the target's vendor name (docker, e2b, daytona).
	Vendor string `json:"vendor" jsonschema:"minLength=1"`
	// Emulated reports a run against a local emulator of the vendor.
	Emulated bool `json:"emulated"`
	// Image is the box image the boxes were made from; ImageDigest its
	// digest, when known.
	Image       string `json:"image" jsonschema:"minLength=1"`
	ImageDigest string `json:"imageDigest,omitempty" jsonschema:"pattern=^sha256:[0-9a-f]{64}$"`
	// Router is the Router's URL (never its key), or "local" for the
	// local endpoint.
	Router string `json:"router" jsonschema:"minLength=1"`
	// Harnesses are the harnesses the cases ran for, with their pins.
	Harnesses []HarnessRun `json:"harnesses" jsonschema:"minItems=1"`
	// Boxctl is the version of boxctl that ran the suite.
	Boxctl string `json:"boxctl"`
	// StartedAt is when the run began; Seconds how long it took.
	StartedAt time.Time `json:"startedAt"`
	Seconds   float64   `json:"seconds" jsonschema:"minimum=0"`
	// Summary counts the results.
	Summary Summary `json:"summary"`
	// Results are in catalogue order, harness by harness.
	Results []Result `json:"results"`
}

// HarnessRun is a harness the suite ran for.
type HarnessRun struct {
	Name string `json:"name" jsonschema:"pattern=^[a-z][a-z0-9-]*$"`
	// Version is the harness's pinned version.
	Version string `json:"version" jsonschema:"minLength=1"`
	// Model is the model route its environments declared.
	Model string `json:"model,omitempty"`
}

// Summary counts results by outcome.
type Summary struct {
	Pass          int `json:"pass" jsonschema:"minimum=0"`
	Fail          int `json:"fail" jsonschema:"minimum=0"`
	NotApplicable int `json:"notApplicable" jsonschema:"minimum=0"`
}

// Result is one case's outcome for one harness.
type Result struct {
	// Case is the case id; Description its one-line description.
	Case        string  `json:"case" jsonschema:"pattern=^[a-z]+\\.[a-z0-9-]+$"`
	Description string  `json:"description"`
	Harness     string  `json:"harness" jsonschema:"pattern=^[a-z][a-z0-9-]*$"`
	Outcome     Outcome `json:"outcome" jsonschema:"enum=pass,enum=fail,enum=not_applicable"`
	// Evidence is what a failed case saw; absent when only its cleanup
	// failed.
	Evidence *Evidence `json:"evidence,omitempty"`
	// Capability and Reason say why a case does not apply.
	Capability string `json:"capability,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Cleanup lists what went wrong cleaning up after the case; any entry
	// fails it.
	Cleanup []string `json:"cleanup,omitempty"`
	// RunTag labelled every box of the case; Boxes are their ids.
	RunTag string   `json:"runTag,omitempty"`
	Boxes  []string `json:"boxes,omitempty"`
	// Notes are what the case observed beside its checks.
	Notes []string `json:"notes,omitempty"`
	// Chaos are a chaos case's figures.
	Chaos *ChaosStats `json:"chaos,omitempty"`
	// Started is when the case began; Seconds how long it took with its
	// cleanup.
	Started time.Time `json:"startedAt"`
	Seconds float64   `json:"seconds" jsonschema:"minimum=0"`
}

// ID names the result: harness/case.
func (r Result) ID() string { return r.Harness + "/" + r.Case }

// Failed reports whether the run has a failed result.
func (r *Report) Failed() bool { return r.Summary.Fail > 0 }

func newReport(r *resolved) *Report {
	rep := &Report{Vendor: r.t.Vendor.Name(), Emulated: r.t.Emulated, Image: r.t.Image, ImageDigest: r.t.ImageDigest,
		Router: r.t.Router.URL, Boxctl: buildinfo.Get().String(), StartedAt: time.Now().UTC()}
	if r.t.Local != nil {
		rep.Router = "local"
	}
	for _, h := range r.harnesses {
		rep.Harnesses = append(rep.Harnesses, HarnessRun{Name: h.Name(), Version: h.Pin.Version})
	}
	return rep
}

// finish sets the results and the summary.
func (r *Report) finish(results []Result) {
	r.Results = results
	r.Seconds = time.Since(r.StartedAt).Seconds()
	r.Summary = Summary{}
	for _, res := range results {
		switch res.Outcome {
		case Pass:
			r.Summary.Pass++
		case Fail:
			r.Summary.Fail++
		case NotApplicable:
			r.Summary.NotApplicable++
		}
	}
}

// WriteJSON writes the report as indented JSON naming its schema.
func (r *Report) WriteJSON(w io.Writer) error {
	c := *r
	c.Schema = SchemaID
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// ReadReport decodes a JSON report, refusing unknown fields.
func ReadReport(rd io.Reader) (*Report, error) {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("read conformance report: %w", err)
	}
	return &r, nil
}

// WriteSummary writes the summary table: one row per result, then the
// totals.
func (r *Report) WriteSummary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tHARNESS\tRESULT\tTIME\tDETAIL")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\t%s\n", res.Case, res.Harness, res.Outcome, res.Seconds, oneLine(res.detail(), 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeChaos(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d passed, %d failed, %d not applicable in %.1fs (%s, image %s)\n",
		r.Summary.Pass, r.Summary.Fail, r.Summary.NotApplicable, r.Seconds, r.target(), r.Image)
	return err
}

// writeChaos writes the chaos cases' figures, one row per fault kind,
// when the run has any.
func (r *Report) writeChaos(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	rows := 0
	for _, res := range r.Results {
		st := res.Chaos
		if st == nil {
			continue
		}
		if rows == 0 {
			fmt.Fprintln(tw, "\nVENDOR\tKIND\tFAULTS\tRUNS\tEVENTS\tLOST\tDUPLICATED\tLEAKED\tRESUME P50\tRESUME P99\t")
		}
		rows++
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f ms\t%.1f ms\t\n", r.target(), st.Kind, st.Faults, st.Runs, st.Events,
			st.Lost, st.Duplicated, st.Leaked, st.ResumeP50Ms, st.ResumeP99Ms)
	}
	return tw.Flush()
}

func (r *Report) target() string {
	if r.Emulated {
		return r.Vendor + " emulator"
	}
	return r.Vendor
}

// WriteText writes the summary table, then the evidence of every failure.
func (r *Report) WriteText(w io.Writer) error {
	if err := r.WriteSummary(w); err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.Outcome != Fail {
			continue
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "\nFAIL %s: %s\n", res.ID(), res.Description)
		if res.Evidence != nil {
			for _, line := range strings.Split(res.Evidence.String(), "\n") {
				fmt.Fprintf(&b, "  %s\n", line)
			}
		}
		for _, c := range res.Cleanup {
			fmt.Fprintf(&b, "  cleanup: %s\n", c)
		}
		if res.RunTag != "" {
			fmt.Fprintf(&b, "  run tag: %s\n", res.RunTag)
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// detail is a result's one-line explanation.
func (r Result) detail() string {
	switch {
	case r.Outcome == NotApplicable:
		return "needs " + r.Capability + ": " + r.Reason
	case r.Evidence != nil:
		return "got " + r.Evidence.Got
	case len(r.Cleanup) > 0:
		return "cleanup: " + r.Cleanup[0]
	case len(r.Notes) > 0:
		return r.Notes[0]
	}
	return ""
}

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// JSONSchema generates the JSON Schema of the JSON report from the Go
// types. The published report.schema.json must equal its rendering (a
// test checks it; `go test ./conformance -run Schema -update` rewrites it).
func JSONSchema() ([]byte, error) {
	return publishedSchema(&Report{}, SchemaID, "boxctl conformance report",
		"The outcome of one run of the boxctl conformance suite: a result per case and harness.")
}

// publishedSchema renders the JSON Schema of v's type, closed to unknown
// properties, as the package publishes it.
func publishedSchema(v any, id, title, description string) ([]byte, error) {
	rf := jsonschema.Reflector{AllowAdditionalProperties: false}
	s := rf.Reflect(v)
	s.ID, s.Title, s.Description = jsonschema.ID(id), title, description
	return encodeIndented(s)
}

// Report formats of Write.
const (
	FormatText  = "text"
	FormatJSON  = "json"
	FormatJUnit = "junit"
)

// Formats are the formats Write renders.
var Formats = []string{FormatText, FormatJSON, FormatJUnit}

// Write renders the report in format (one of Formats; text for any
// other).
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case FormatJSON:
		return r.WriteJSON(w)
	case FormatJUnit:
		return r.WriteJUnit(w)
	}
	return r.WriteText(w)
}

// WriteFile writes the report in format to the file at path (created or
// truncated, mode 0644).
func (r *Report) WriteFile(path, format string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := r.Write(f, format); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ParseReportFile splits a [FORMAT=]FILE value, such as "junit=out.xml",
// into its format (def when it names none) and file. A FORMAT that is not
// one of Formats, and is not part of a path (it has no "/" or "."), gives
// the file "".
func ParseReportFile(v, def string) (format, file string) {
	if f, name, ok := strings.Cut(v, "="); ok && slices.Contains(Formats, f) {
		return f, name
	} else if ok && !strings.ContainsAny(f, "/.") {
		return f, ""
	}
	return def, v
}
