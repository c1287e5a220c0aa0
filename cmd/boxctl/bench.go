package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// benchOptions are the flags of `boxctl bench`.
type benchOptions struct {
	target    string
	image     string
	harness   string
	router    string
	burst     int
	turns     int
	pause     time.Duration
	settle    time.Duration
	workloads []string
	modes     []string
	jsonFile  string
	svgFile   string

	// Resolved: the Router, unless local.
	local                bool
	routerURL, routerKey string
}

func newBenchCmd(a *app, runF func(context.Context, *benchOptions) error) *cobra.Command {
	o := &benchOptions{target: docker.Name, harness: "claude-code", burst: 10, turns: 10, pause: time.Second, settle: 3 * time.Minute}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure box creation and the time to the agent's first event on a target",
		Long: `bench measures what a user of --target waits for, with a baseline from the
same run beside each figure:

  burst        --burst boxes asked for at once, each timed from the request to
               the answer of ` + "`node -v`" + ` run in it (time to interactive): the
               vendor's own create of the image (bare: ` + "`docker run`" + ` on Docker),
               boxctl's create (cold: the bridge up and its harness checked), and
               a claim of a standby box booted before (pool)
  first-event  --turns turns one after the other, each timed from the request to
               the agent's first event: on a cold box whose bridge starts no
               harness ahead (no-spare, the baseline), on a cold box, on a
               claimed pooled box, and the second turn of a session (session)
  turn         the same, timed to the turn's end

Each row gives the success rate, p50, p95 and p99, and its ratio to the
workload's baseline (bare for a burst, no-spare for a turn). The model is the
Router as for boxctl up, else (--router local, the default without one) a local
endpoint that answers at once, so the figures are boxctl's and the harness's.
The table goes to stdout (-o json: the report, whose schema is
conformance/bench.schema.json); --json and --svg write the report and a chart to
files. Every box bench makes is destroyed before it exits.`,
		Example: `  boxctl bench
  boxctl bench --burst 100 --run burst --svg bench.svg
  boxctl bench --target e2b --burst 20 --json e2b.json`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return o.resolve(os.Getenv) }, runF, runBench),
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", o.target, "where the boxes run: "+strings.Join(boxTargets, ", "))
	f.StringVar(&o.image, "image", "", "box image (default: the last boxctl build for --target)")
	f.StringVar(&o.harness, "harness", o.harness, "the harness the boxes serve")
	f.StringVar(&o.router, "router", "", `model Router URL (key in $`+routerKeyVar+`), or "local" (default: $`+routerURLEnv+`, else local)`)
	f.IntVar(&o.burst, "burst", o.burst, "boxes each burst asks for at once")
	f.IntVar(&o.turns, "turns", o.turns, "turns each turn workload times")
	f.DurationVar(&o.pause, "pause", o.pause, "pause before each timed turn, after the box is ready or the session's first answer came (a caller's think time)")
	f.DurationVar(&o.settle, "settle", o.settle, "wait at most this long, between booting a pool and claiming it, for this machine to be quiet (the pool's harnesses started ahead); 0 for none")
	f.StringSliceVar(&o.workloads, "run", nil, "workloads to run: "+strings.Join(conformance.Workloads, ", ")+" (default: all)")
	f.StringSliceVar(&o.modes, "mode", nil, "modes to run: "+strings.Join(conformance.Modes, ", ")+" (default: all)")
	f.StringVar(&o.jsonFile, "json", "", "write the JSON report to this file")
	f.StringVar(&o.svgFile, "svg", "", "write the chart (SVG) to this file")
	_ = cmd.RegisterFlagCompletionFunc("target", cobra.FixedCompletions(boxTargets, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("run", cobra.FixedCompletions(conformance.Workloads, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// resolve checks the flags and finds the Router; getenv reads the
// environment.
func (o *benchOptions) resolve(getenv func(string) string) error {
	if err := checkBoxTarget(o.target); err != nil {
		return err
	}
	if o.burst < 1 || o.turns < 1 || o.pause < 0 || o.settle < 0 {
		return usageErrorf("--burst and --turns must be at least 1, --pause and --settle not negative")
	}
	for _, w := range o.workloads {
		if !slices.Contains(conformance.Workloads, w) {
			return usageErrorf("--run %q: want %s", w, strings.Join(conformance.Workloads, ", "))
		}
	}
	for _, m := range o.modes {
		if !slices.Contains(conformance.Modes, m) {
			return usageErrorf("--mode %q: want %s", m, strings.Join(conformance.Modes, ", "))
		}
	}
	if o.router == "" && getenv(routerURLEnv) == "" && getenv(routerKeyVar) == "" {
		o.router = routerLocal
	}
	o.local = o.router == routerLocal
	var err error
	o.routerURL, o.routerKey, err = routerFromFlag(o.router, getenv)
	return err
}

func runBench(ctx context.Context, a *app, o *benchOptions) error {
	img, err := (&conformanceOptions{target: o.target, image: o.image}).resolveImage(ctx, a)
	if err != nil {
		return err
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()
	t := conformance.Target{Vendor: v, Image: img.Reference, ImageDigest: img.Digest,
		Router: sandbox.Router{URL: o.routerURL, Key: o.routerKey}}
	if o.local {
		stop, err := a.useLocal(ctx, v, &t)
		if err != nil {
			return err
		}
		defer stop()
	}
	a.log.Info("bench", "target", o.target, "image", img.Reference, "harness", o.harness, "burst", o.burst, "turns", o.turns)
	rep, runErr := conformance.Bench(ctx, t, conformance.BenchOptions{Harness: o.harness, Burst: o.burst, Turns: o.turns, Pause: pauseOption(o.pause), Settle: pauseOption(o.settle),
		Workloads: o.workloads, Modes: o.modes, Logger: a.log})
	if rep == nil {
		return usageError{runErr}
	}
	for _, out := range []struct {
		name  string
		write func(io.Writer) error
	}{{o.jsonFile, rep.WriteJSON}, {o.svgFile, rep.WriteSVG}} {
		if out.name == "" {
			continue
		}
		if err := writeFile(out.name, out.write); err != nil {
			return err
		}
	}
	if err := a.print(rep, rep.WriteText); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	for _, r := range rep.Rows {
		if r.OK < r.N {
			return fmt.Errorf("bench: %s %s: %d of %d samples failed", r.Workload, r.Mode, r.N-r.OK, r.N)
		}
	}
	return nil
}

// pauseOption is --pause or --settle as BenchOptions takes it (negative:
// none).
func pauseOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// writeFile writes what write makes to a new file name.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
