package conformance_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jstemmer/go-junit-report/v2/junit"
	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

func TestSchema_published(t *testing.T) {
	got, err := conformance.JSONSchema()
	if err != nil {
		t.Fatalf("JSONSchema() = %v", err)
	}
	goldentest.Check(t, conformance.SchemaFile, got)
}

// sampleReport has a result of every outcome, a cleanup failure beside a
// case's own, and text that XML and JSON must escape.
func sampleReport() *conformance.Report {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return &conformance.Report{Vendor: "docker", Image: "boxctl-test/box:abc", Router: "local",
		ImageDigest: "sha256:" + strings.Repeat("ab", 32), Boxctl: "dev",
		Harnesses: []conformance.HarnessRun{{Name: "claude-code", Version: "2.1.332"}}, StartedAt: start, Seconds: 12.5,
		Summary: conformance.Summary{Pass: 1, Fail: 2, NotApplicable: 1},
		Results: []conformance.Result{
			{Case: "provider.turn", Description: "a turn", Harness: "claude-code", Outcome: conformance.Pass, RunTag: "run-a",
				Boxes: []string{"c1"}, Notes: []string{"served by m"}, Started: start, Seconds: 2},
			{Case: "session.event-ids", Description: "ids", Harness: "claude-code", Outcome: conformance.Fail, RunTag: "run-b",
				Evidence: &conformance.Evidence{Request: `Session.Events("0") <&>`, Got: "3 events", Want: "6 events"},
				Cleanup:  []string{"box c2 was left with run tag run-b; the runner destroyed it"}, Started: start, Seconds: 3},
			{Case: "box.destroy", Description: "destroy", Harness: "claude-code", Outcome: conformance.Fail, RunTag: "run-c",
				Cleanup: []string{"destroy box c3: refused"}, Started: start, Seconds: 1},
			{Case: "interactions.answer", Description: "answer", Harness: "claude-code", Outcome: conformance.NotApplicable,
				Capability: "interactions", Reason: "not claimed", Started: start},
		}}
}

func TestReport_JSONValidates(t *testing.T) { checkReports(t, sampleReport()) }

// checkReports checks a report's JSON against the published schema with a
// JSON Schema validator, reads it back, and loads its JUnit XML with the
// JUnit model of go-junit-report, checking counts and failures.
func checkReports(t *testing.T, rep *conformance.Report) {
	t.Helper()
	sch := compileSchema(t, conformance.SchemaFile, conformance.SchemaID)
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("the JSON report does not validate against %s: %v\n%s", conformance.SchemaFile, err, js.String())
	}
	back, err := conformance.ReadReport(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	want := *rep
	want.Schema = conformance.SchemaID
	if diff := cmp.Diff(&want, back); diff != "" {
		t.Errorf("ReadReport(WriteJSON(r)) (-want +got):\n%s", diff)
	}
	// A document that breaks the schema is refused.
	broken := bytes.Replace(js.Bytes(), []byte(`"outcome": "`), []byte(`"outcome": "maybe-`), 1)
	var bad any
	if err := json.Unmarshal(broken, &bad); err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(bad); err == nil {
		t.Error("the schema accepts an unknown outcome")
	}

	var x bytes.Buffer
	if err := rep.WriteJUnit(&x); err != nil {
		t.Fatal(err)
	}
	var suites junit.Testsuites
	if err := xml.Unmarshal(x.Bytes(), &suites); err != nil {
		t.Fatalf("the JUnit report does not load: %v\n%s", err, x.String())
	}
	if suites.Tests != len(rep.Results) || suites.Failures != rep.Summary.Fail || suites.Skipped != rep.Summary.NotApplicable {
		t.Errorf("JUnit totals = %d tests, %d failures, %d skipped; want %d, %d, %d", suites.Tests, suites.Failures, suites.Skipped,
			len(rep.Results), rep.Summary.Fail, rep.Summary.NotApplicable)
	}
	byName := map[string]junit.Testcase{}
	for _, s := range suites.Suites {
		for _, tc := range s.Testcases {
			byName[s.Name+" "+tc.Name] = tc
		}
	}
	for _, res := range rep.Results {
		tc, ok := byName[rep.Vendor+"/"+res.Harness+" "+res.Case]
		switch {
		case !ok:
			t.Errorf("JUnit report has no testcase for %s", res.ID())
		case res.Outcome == conformance.Fail && (tc.Failure == nil || (res.Evidence != nil && !strings.Contains(tc.Failure.Data, res.Evidence.Request))):
			t.Errorf("JUnit testcase %s: failure %+v, want the evidence", res.ID(), tc.Failure)
		case res.Outcome == conformance.Fail && len(res.Cleanup) > 0 && !strings.Contains(tc.Failure.Data, res.Cleanup[0]):
			t.Errorf("JUnit testcase %s: failure %+v, want the cleanup failure", res.ID(), tc.Failure)
		case res.Outcome == conformance.NotApplicable && (tc.Skipped == nil || !strings.Contains(tc.Skipped.Message, res.Capability)):
			t.Errorf("JUnit testcase %s: skipped %+v, want the capability", res.ID(), tc.Skipped)
		case res.Outcome == conformance.Pass && (tc.Failure != nil || tc.Skipped != nil):
			t.Errorf("JUnit testcase %s passed but reads %+v %+v", res.ID(), tc.Failure, tc.Skipped)
		}
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, res := range rep.Results {
		if !strings.Contains(text.String(), res.Case) {
			t.Errorf("the text report does not list %s", res.ID())
		}
		if res.Outcome == conformance.Fail && res.Evidence != nil && !strings.Contains(text.String(), res.Evidence.Want) {
			t.Errorf("the text report does not show the evidence of %s", res.ID())
		}
	}
}

func TestSelect(t *testing.T) {
	all := conformance.Cases()
	ids := func(cs []conformance.Case) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	seen := map[string]bool{}
	for _, c := range all {
		if seen[c.ID] || c.Description == "" || c.Group() == c.ID {
			t.Errorf("case %q: ids must be unique group.name with a description", c.ID)
		}
		seen[c.ID] = true
	}
	tests := []struct {
		patterns []string
		want     []string
	}{
		{nil, ids(all)},
		{[]string{"control.cancel"}, []string{"control.cancel"}},
		{[]string{"box.pin", "provider.turn"}, []string{"provider.turn", "box.pin"}},
		{[]string{"*.destroy"}, []string{"provider.destroy", "box.destroy"}},
		{[]string{"interactions"}, []string{"interactions.answer", "interactions.refusals"}},
	}
	for _, tt := range tests {
		got, err := conformance.Select(tt.patterns)
		if err != nil {
			t.Errorf("Select(%q) = %v", tt.patterns, err)
			continue
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
			t.Errorf("Select(%q) (-want +got):\n%s", tt.patterns, diff)
		}
	}
	if _, err := conformance.Select([]string{"no.such-case"}); err == nil || !strings.Contains(err.Error(), "box.pin") {
		t.Errorf("Select(unknown) = %v, want an error listing the cases", err)
	}
}

// TestReport_Write: each format renders as its own writer does, in a
// writer or a file; an unknown format is text.
func TestReport_Write(t *testing.T) {
	rep := sampleReport()
	for _, format := range append(slices.Clone(conformance.Formats), "other") {
		var want, got bytes.Buffer
		switch format {
		case conformance.FormatJSON:
			_ = rep.WriteJSON(&want)
		case conformance.FormatJUnit:
			_ = rep.WriteJUnit(&want)
		default:
			_ = rep.WriteText(&want)
		}
		if err := rep.Write(&got, format); err != nil || got.String() != want.String() {
			t.Errorf("Write(%s) = %v; output differs from its writer's", format, err)
		}
		path := filepath.Join(t.TempDir(), "report")
		if err := rep.WriteFile(path, format); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != want.String() {
			t.Errorf("WriteFile(%s) wrote %d bytes (%v), want its writer's %d", format, len(b), err, want.Len())
		}
	}
}

func TestParseReportFile(t *testing.T) {
	tests := []struct {
		v, def               string
		wantFormat, wantFile string
	}{
		{"report.json", conformance.FormatText, conformance.FormatText, "report.json"},
		{"json=out/r.json", conformance.FormatText, conformance.FormatJSON, "out/r.json"},
		{"junit=r.xml", conformance.FormatJSON, conformance.FormatJUnit, "r.xml"},
		{"yaml=r.yaml", conformance.FormatText, "yaml", ""},
		{"out/a=b.txt", conformance.FormatJSON, conformance.FormatJSON, "out/a=b.txt"},
		{"a.b=c", conformance.FormatText, conformance.FormatText, "a.b=c"},
	}
	for _, tt := range tests {
		f, file := conformance.ParseReportFile(tt.v, tt.def)
		if f != tt.wantFormat || file != tt.wantFile {
			t.Errorf("ParseReportFile(%q, %q) = %q, %q; want %q, %q", tt.v, tt.def, f, file, tt.wantFormat, tt.wantFile)
		}
	}
}

// TestReport_chaosTable checks the summary's table of chaos figures: one
// row per fault kind, the vendor kind and its leaks included.
func TestReport_chaosTable(t *testing.T) {
	rep := sampleReport()
	rep.Emulated, rep.Vendor = true, "e2b"
	rep.Results = append(rep.Results, conformance.Result{Case: "chaos.vendor", Harness: "claude-code", Outcome: conformance.Pass,
		Chaos: &conformance.ChaosStats{Kind: conformance.FaultVendor, Faults: 12, Runs: 3, Events: 90, ResumeP50Ms: 1.5, ResumeP99Ms: 4}})
	var b bytes.Buffer
	if err := rep.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, " vendor ") {
			row = strings.Join(strings.Fields(l), " ")
		}
	}
	if want := "e2b emulator vendor 12 3 90 0 0 0 1.5 ms 4.0 ms"; row != want {
		t.Errorf("chaos row %q, want %q in:\n%s", row, want, b.String())
	}
	if !strings.Contains(b.String(), "RESUME P99") {
		t.Errorf("no chaos table header in:\n%s", b.String())
	}
}

// compileSchema compiles the published schema in file, whose $id is id.
func compileSchema(t *testing.T, file, id string) *jsonschema.Schema {
	t.Helper()
	schema, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, bytes.NewReader(schema)); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatalf("compile %s: %v", file, err)
	}
	return sch
}
