package conformance_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

func TestBenchSchema_published(t *testing.T) {
	got, err := conformance.BenchJSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	goldentest.Check(t, conformance.BenchSchemaFile, got)
}

// sampleBench has every workload and mode, a baseline comparison, a row
// whose samples all failed, and text the SVG must escape.
func sampleBench() *conformance.BenchReport {
	return &conformance.BenchReport{Vendor: "docker", Image: "boxctl-test/box:<abc>&", Harness: "claude-code", Model: "local",
		Boxctl: "dev", Host: conformance.BenchHost{OS: "linux", Arch: "amd64", CPUs: 2, MemoryMiB: 24000},
		StartedAt: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC), Seconds: 61.5, PauseMs: 1000, PooledBoxMiB: 41.25, ClaimedBoxMiB: 172.5,
		Rows: []conformance.BenchRow{
			{Workload: "burst", Mode: "bare", Concurrency: 20, N: 20, OK: 20, SuccessRate: 1, P50Ms: 410, P95Ms: 520, P99Ms: 540, MinMs: 300, MaxMs: 540},
			{Workload: "burst", Mode: "cold", Concurrency: 20, N: 20, OK: 19, SuccessRate: 0.95, P50Ms: 900, P95Ms: 1200, P99Ms: 1300, MinMs: 700, MaxMs: 1300,
				Baseline: "bare", RatioP50: 2.195, RatioP99: 2.407, Errors: []string{"create box: <refused>"},
				PhasesP50Ms: map[string]float64{"vendor.create": 400, "spawn": 120, "health": 300, "pins": 2}},
			{Workload: "burst", Mode: "pool", Concurrency: 20, N: 20, OK: 20, SuccessRate: 1, P50Ms: 60, P95Ms: 90, P99Ms: 95, MinMs: 40, MaxMs: 95,
				Baseline: "bare", RatioP50: 0.146, RatioP99: 0.176},
			{Workload: "first-event", Mode: "cold", Concurrency: 1, N: 10, OK: 10, SuccessRate: 1, P50Ms: 600, P95Ms: 700, P99Ms: 720, MinMs: 500, MaxMs: 720},
			{Workload: "first-event", Mode: "pool", Concurrency: 1, N: 10, OK: 0, SuccessRate: 0, Errors: []string{"claim: gone"}},
			{Workload: "first-event", Mode: "session", Concurrency: 1, N: 10, OK: 10, SuccessRate: 1, P50Ms: 80, P95Ms: 95, P99Ms: 99, MinMs: 70, MaxMs: 99,
				Baseline: "cold", RatioP50: 0.133, RatioP99: 0.138},
		}}
}

// TestBench_Reports: the JSON report validates against the published
// schema and reads back; the text table and the SVG chart are golden.
func TestBench_Reports(t *testing.T) {
	rep := sampleBench()
	sch := compileSchema(t, conformance.BenchSchemaFile, conformance.BenchSchemaID)
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("the JSON report does not validate: %v\n%s", err, js.String())
	}
	var back conformance.BenchReport
	dec := json.NewDecoder(bytes.NewReader(js.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil || back.Schema != conformance.BenchSchemaID || len(back.Rows) != len(rep.Rows) {
		t.Errorf("read back: %v, schema %q, %d rows", err, back.Schema, len(back.Rows))
	}
	var bad any
	_ = json.Unmarshal(bytes.Replace(js.Bytes(), []byte(`"mode": "pool"`), []byte(`"mode": "warm"`), 1), &bad)
	if err := sch.Validate(bad); err == nil {
		t.Error("the schema accepts an unknown mode")
	}

	var text, svg bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	goldentest.Check(t, "testdata/bench.txt", text.Bytes())
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	goldentest.Check(t, "testdata/bench.svg", svg.Bytes())
	d := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
	}
}

var (
	benchBurst = flag.Int("bench-burst", 2, "boxes each burst of TestBench_Live asks for at once")
	benchTurns = flag.Int("bench-turns", 1, "turns each turn workload of TestBench_Live times")
	// A machine busy with the other suites is never quiet: the small
	// size does not wait for it.
	benchSettle = flag.Duration("bench-settle", -1, "wait at most this long for a pool's boxes to settle before its claims (negative: none)")
)

// TestBench_Live runs the bench at a small size on every target (gVisor
// aside: BenchmarkGVisor measures it): every sample succeeds, the rows
// compare to their baselines, and a pooled box's memory is measured.
// Full size: `boxctl bench --burst 100` on Docker, and
// `go test ./conformance -run TestBench_Live -v -bench-burst 20 -bench-turns 10 -bench-settle 3m`
// on every target.
func TestBench_Live(t *testing.T) {
	t.Parallel()
	w := setup(t)
	for _, tg := range targets {
		if tg.name == "docker-gvisor" {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			target := tg.make(t, w, boxtest.Options{Harnesses: []string{"claude-code"}})
			rep, err := conformance.Bench(t.Context(), target, conformance.BenchOptions{Burst: *benchBurst, Turns: *benchTurns, Settle: *benchSettle,
				Workloads: []string{conformance.WorkloadBurst, conformance.WorkloadFirstEvent}})
			if err != nil {
				t.Fatal(err)
			}
			var text bytes.Buffer
			_ = rep.WriteText(&text)
			t.Logf("bench on %s:\n%s", tg.name, text.String())
			if len(rep.Rows) != 7 {
				t.Errorf("%d rows, want 3 modes of a burst and 4 of first-event", len(rep.Rows))
			}
			for _, r := range rep.Rows {
				if r.OK != r.N || r.N == 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
					t.Errorf("%s %s: %d of %d ok, p50 %.1f p99 %.1f ms: %v", r.Workload, r.Mode, r.OK, r.N, r.P50Ms, r.P99Ms, r.Errors)
				}
				if (r.Mode == conformance.ModeBare || r.Mode == conformance.ModeNoSpare) != (r.Baseline == "") {
					t.Errorf("%s %s compared to %q", r.Workload, r.Mode, r.Baseline)
				}
			}
			// Both hold a bridge and an init; whether they hold a harness
			// started ahead depends on how quiet the machine was.
			if rep.PooledBoxMiB <= 1 || rep.ClaimedBoxMiB <= 1 {
				t.Errorf("a pooled box holds %.1f MiB, a claimed one %.1f MiB: want their processes' memory",
					rep.PooledBoxMiB, rep.ClaimedBoxMiB)
			}
		})
	}
}
