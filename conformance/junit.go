package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// The JUnit XML report, in the element and attribute names of the
// de-facto JUnit schema (testsuites > testsuite > testcase with failure,
// skipped and system-out) that CI systems read.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Skipped  int          `xml:"skipped,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name       string          `xml:"name,attr"`
		Tests      int             `xml:"tests,attr"`
		Failures   int             `xml:"failures,attr"`
		Errors     int             `xml:"errors,attr"`
		Skipped    int             `xml:"skipped,attr"`
		Time       string          `xml:"time,attr"`
		Timestamp  string          `xml:"timestamp,attr"`
		Properties []junitProperty `xml:"properties>property"`
		Cases      []junitCase     `xml:"testcase"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitCase struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitMessage `xml:"failure"`
		Skipped   *junitMessage `xml:"skipped"`
		SystemOut string        `xml:"system-out,omitempty"`
	}
	junitMessage struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr,omitempty"`
		Body    string `xml:",chardata"`
	}
)

// WriteJUnit writes the report as JUnit XML: one testsuite per harness
// (named vendor/harness), one testcase per case; a failure carries the
// evidence and the cleanup failures, a case that does not apply is
// skipped naming its capability.
func (r *Report) WriteJUnit(w io.Writer) error {
	out := junitSuites{Name: "boxctl conformance (" + r.target() + ")", Time: seconds(r.Seconds)}
	for _, h := range r.Harnesses {
		s := junitSuite{Name: r.Vendor + "/" + h.Name, Timestamp: r.StartedAt.Format(time.RFC3339),
			Properties: []junitProperty{{"vendor", r.Vendor}, {"emulated", fmt.Sprint(r.Emulated)}, {"image", r.Image},
				{"imageDigest", r.ImageDigest}, {"router", r.Router}, {"harness", h.Name}, {"harnessVersion", h.Version},
				{"boxctl", r.Boxctl}}}
		var total float64
		for _, res := range r.Results {
			if res.Harness != h.Name {
				continue
			}
			total += res.Seconds
			tc := junitCase{Name: res.Case, Classname: "conformance." + r.Vendor + "." + h.Name, Time: seconds(res.Seconds),
				SystemOut: strings.Join(append([]string{res.Description}, res.Notes...), "\n")}
			switch res.Outcome {
			case Fail:
				s.Failures++
				tc.Failure = &junitMessage{Message: oneLine(res.detail(), 200), Type: "fail", Body: failureBody(res)}
			case NotApplicable:
				s.Skipped++
				tc.Skipped = &junitMessage{Message: "not applicable: needs " + res.Capability + ": " + res.Reason}
			}
			s.Tests++
			s.Cases = append(s.Cases, tc)
		}
		s.Time = seconds(total)
		out.Tests, out.Failures, out.Skipped = out.Tests+s.Tests, out.Failures+s.Failures, out.Skipped+s.Skipped
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func failureBody(res Result) string {
	var lines []string
	if res.Evidence != nil {
		lines = append(lines, res.Evidence.String())
	}
	for _, c := range res.Cleanup {
		lines = append(lines, "cleanup: "+c)
	}
	if res.RunTag != "" {
		lines = append(lines, "run tag: "+res.RunTag)
	}
	return strings.Join(lines, "\n")
}

func seconds(s float64) string { return fmt.Sprintf("%.3f", s) }
