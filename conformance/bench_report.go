package conformance

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// BenchSchemaFile is the published JSON Schema of the bench report.
const BenchSchemaFile = "bench.schema.json"

// BenchSchemaID is the $id of the bench report's schema.
const BenchSchemaID = "https://github.com/tangle-network/boxctl/conformance/bench.schema.json"

// BenchJSONSchema generates the JSON Schema of the bench report from the
// Go types; bench.schema.json must equal it (a test checks it).
func BenchJSONSchema() ([]byte, error) {
	return publishedSchema(&BenchReport{}, BenchSchemaID, "boxctl bench report",
		"What one run of boxctl bench measured: per workload and mode, success and latency quantiles, with ratios to a baseline of the same run.")
}

func encodeIndented(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteJSON writes the report as indented JSON (bench.schema.json).
func (r *BenchReport) WriteJSON(w io.Writer) error {
	c := *r
	c.Schema = BenchSchemaID
	b, err := encodeIndented(c)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WriteText writes the report as a table, a row per workload and mode.
func (r *BenchReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "WORKLOAD\tMODE\tCONC\tOK\tP50 MS\tP95 MS\tP99 MS\tVS BASELINE (P50, P99)\t\n")
	for _, row := range r.Rows {
		vs := "-"
		if row.Baseline != "" {
			vs = fmt.Sprintf("%.2fx, %.2fx %s", row.RatioP50, row.RatioP99, row.Baseline)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%.1f\t%.1f\t%.1f\t%s\t\n", row.Workload, row.Mode, row.Concurrency, row.OK, row.N,
			row.P50Ms, row.P95Ms, row.P99Ms, vs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s, image %s, %s, model %s, %.0f ms pause before each timed turn; %s/%s, %d CPUs; %.1fs\n", r.Vendor, r.Image,
		r.Harness, r.Model, r.PauseMs, r.Host.OS, r.Host.Arch, r.Host.CPUs, r.Seconds)
	if r.PooledBoxMiB > 0 {
		fmt.Fprintf(w, "a pooled box holds %.1f MiB resident (bridge, box-init, and the harness it started ahead)", r.PooledBoxMiB)
		if r.Host.MemoryMiB > 0 {
			fmt.Fprintf(w, ": this machine's %.1f GiB hold about %d of them", r.Host.MemoryMiB/1024, int(r.Host.MemoryMiB/r.PooledBoxMiB))
		}
		fmt.Fprintln(w)
	}
	if r.ClaimedBoxMiB > 0 {
		fmt.Fprintf(w, "a claimed box holds %.1f MiB resident at its first turn (with the harness started ahead)\n", r.ClaimedBoxMiB)
	}
	for _, row := range r.Rows {
		if len(row.PhasesP50Ms) == 0 {
			continue
		}
		var parts []string
		for _, name := range slices.SortedFunc(maps.Keys(row.PhasesP50Ms), func(a, b string) int {
			return cmp.Compare(row.PhasesP50Ms[b], row.PhasesP50Ms[a])
		}) {
			parts = append(parts, fmt.Sprintf("%s %.0f", name, row.PhasesP50Ms[name]))
		}
		fmt.Fprintf(w, "%s %s, median ms by phase: %s\n", row.Workload, row.Mode, strings.Join(parts, ", "))
	}
	for _, row := range r.Rows {
		for _, e := range row.Errors {
			fmt.Fprintf(w, "%s %s failed: %s\n", row.Workload, row.Mode, e)
		}
	}
	return nil
}

// SVG chart geometry.
const (
	svgWidth   = 760
	svgLabelW  = 190
	svgBarH    = 18
	svgRowGap  = 8
	svgGroupH  = 28
	svgMarginT = 48
	svgMarginB = 36
)

// WriteSVG draws the report as a chart a person reads at a glance: a
// panel per workload, a bar per mode from 0 to its p50, a whisker on to
// its p99, each labelled in milliseconds, on the panel's own scale.
func (r *BenchReport) WriteSVG(w io.Writer) error {
	type group struct {
		workload string
		rows     []BenchRow
	}
	var groups []group
	for _, row := range r.Rows {
		if n := len(groups); n == 0 || groups[n-1].workload != row.Workload {
			groups = append(groups, group{workload: row.Workload})
		}
		groups[len(groups)-1].rows = append(groups[len(groups)-1].rows, row)
	}
	height := svgMarginT + svgMarginB
	for _, g := range groups {
		height += svgGroupH + len(g.rows)*(svgBarH+svgRowGap)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="16" y="24" font-size="15" font-weight="bold">boxctl bench: %s, %s, model %s</text>`+"\n",
		esc(r.Vendor), esc(r.Harness), esc(r.Model))
	fmt.Fprintf(&b, `<text x="16" y="40" fill="#555555">bar: p50, whisker: p99, in ms; %s/%s, %d CPUs</text>`+"\n", esc(r.Host.OS), esc(r.Host.Arch), r.Host.CPUs)
	y := svgMarginT
	plot := float64(svgWidth - svgLabelW - 210)
	colors := map[string]string{ModeBare: "#9e9e9e", ModeNoSpare: "#6d4c41", ModeCold: "#ef6c00", ModePool: "#2e7d32", ModeSession: "#1565c0"}
	for _, g := range groups {
		y += svgGroupH
		fmt.Fprintf(&b, `<text x="16" y="%d" font-weight="bold">%s</text>`+"\n", y-8, esc(g.workload))
		top := 0.0
		for _, row := range g.rows {
			top = math.Max(top, row.P99Ms)
		}
		scale := 0.0
		if top > 0 {
			scale = plot / top
		}
		for _, row := range g.rows {
			label := fmt.Sprintf("%s (%d/%d, x%d)", row.Mode, row.OK, row.N, row.Concurrency)
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", svgLabelW-8, y+13, esc(label))
			p50, p99 := row.P50Ms*scale, row.P99Ms*scale
			color := colors[row.Mode]
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", svgLabelW, y, p50, svgBarH, color)
			if p99 > p50 {
				mid := y + svgBarH/2
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", svgLabelW+p50, mid, svgLabelW+p99, mid, color)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", svgLabelW+p99, y+3, svgLabelW+p99, y+svgBarH-3, color)
			}
			text := fmt.Sprintf("%.0f / %.0f ms", row.P50Ms, row.P99Ms)
			if row.Baseline != "" {
				text += fmt.Sprintf(" (%.2fx %s)", row.RatioP50, row.Baseline)
			}
			if row.OK == 0 {
				text = "all failed"
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#333333">%s</text>`+"\n", svgLabelW+math.Max(p99, p50)+6, y+13, esc(text))
			y += svgBarH + svgRowGap
		}
	}
	fmt.Fprintf(&b, `<text x="16" y="%d" fill="#555555">image %s; boxctl %s</text>`+"\n", height-14, esc(r.Image), esc(r.Boxctl))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func esc(s string) string { return html.EscapeString(s) }
