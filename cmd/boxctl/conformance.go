package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/open"
)

// Report formats of `boxctl conformance`.
var reportFormats = conformance.Formats

// conformanceOptions are the flags of `boxctl conformance`.
type conformanceOptions struct {
	target       string
	image        string
	buildRecord  string
	harnesses    []string
	router       string
	cases        []string
	report       string
	reportFiles  []string
	parallel     int
	caseTimeout  time.Duration
	readyTimeout time.Duration
	repo, gitRef string
	emulated     bool
	list         bool
	chaos        bool
	faults       int
	chaosIdle    time.Duration
	chaosLanes   int

	// Resolved by resolve: the Router, unless routerLocal.
	routerURL, routerKey string
}

func newConformanceCmd(a *app, runF func(context.Context, *conformanceOptions) error) *cobra.Command {
	o := &conformanceOptions{target: docker.Name, report: "text", parallel: conformance.DefaultParallel,
		caseTimeout: conformance.DefaultCaseTimeout, readyTimeout: sandbox.DefaultReadyTimeout}
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run the live conformance suite against a built box image on a vendor",
		Long: `conformance runs the live suite against a box image on --target, for each
--harness: named cases that create boxes through the sandbox provider and check
the capability document and its claims, streamed turns with usage and the served
model, keyed creates, dispatch and replay, control references, cancel, timeout
and busy conflicts, permission interactions where claimed, and what a box adds
(readiness, the harness pin, secrets kept out of sight, the workspace clone, its
lifetime, nothing left after destroy). Each case ends pass, fail (with the
request, what came back and what was expected) or not applicable (naming the
capability). Cases run in parallel (--parallel), each under its own deadline,
each with a run tag of its own; every box a case makes is destroyed, and a
failed cleanup is reported beside the case.

The image is --image REF, or the reference of a build record (--build-record,
what boxctl build -o json prints), or on docker the last boxctl build. The
Router is as for boxctl up: --router URL with the key in $` + routerKeyVar + `, else
$` + routerURLEnv + ` and $` + routerKeyVar + `; --router local runs the local model endpoint
with scripted replies (and a small git repository for the clone case) where
the boxes reach it, so the suite runs offline.

Progress goes to stderr, live on a terminal; the report (--report text, json or
junit) to stdout, or to each --report-file [FORMAT=]FILE with the summary table
on stdout. The exit status is 1 when any case failed. The JSON report's schema is
conformance/report.schema.json; boxctl pins prove reads it.`,
		Example: `  boxctl conformance --router local
  boxctl conformance --harness claude-code,pi --router local --run session,control.cancel
  boxctl conformance --target e2b --build-record record.json --report-file json=e2b.json --report-file junit=e2b.xml
  boxctl conformance --list`,
		Args: boxArgs(cobra.NoArgs),
		RunE: verbRunE(a, o, func([]string) error { return o.resolve(os.Getenv) }, runF, runConformance),
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", o.target, "where the boxes run: "+strings.Join(boxTargets, ", "))
	f.StringVar(&o.image, "image", "", "box image (default: the build record's, else the last boxctl build for --target)")
	f.StringVar(&o.buildRecord, "build-record", "", "build record (boxctl build -o json) naming the image, its digest and harnesses")
	f.StringSliceVar(&o.harnesses, "harness", nil, "harnesses to run the cases for (default: the build record's, else claude-code)")
	f.StringVar(&o.router, "router", "", `model Router URL (key in $`+routerKeyVar+`), or "local" for the local model endpoint (default: $`+routerURLEnv+`)`)
	f.StringSliceVar(&o.cases, "run", nil, "cases to run: ids, groups (session) or patterns (control.*) (default: all)")
	f.StringVar(&o.report, "report", o.report, "report format: "+strings.Join(reportFormats, ", "))
	f.StringArrayVar(&o.reportFiles, "report-file", nil, "write the report to [FORMAT=]FILE (format default --report; repeatable), and the summary table to stdout")
	f.IntVar(&o.parallel, "parallel", o.parallel, "cases run at once")
	f.DurationVar(&o.caseTimeout, "case-timeout", o.caseTimeout, "deadline of each case")
	f.DurationVar(&o.readyTimeout, "ready-timeout", o.readyTimeout, "how long each box's bridge may take to be ready")
	f.StringVar(&o.repo, "repo", "", "repository the box.clone case clones (default: the local endpoint's, with --router local)")
	f.StringVar(&o.gitRef, "git-ref", "", "ref of --repo to check out")
	f.BoolVar(&o.emulated, "emulator", false, "the vendor's control plane is a local emulator (boxctl emulate): the report proves no harness")
	f.BoolVar(&o.list, "list", false, "list the cases and exit")
	f.BoolVar(&o.chaos, "chaos", false, "run the chaos family (chaos.*): live turns while faults are injected, each stream checked against the bridge's store")
	f.IntVar(&o.faults, "faults", 0, "faults each chaos case injects (default 10)")
	f.DurationVar(&o.chaosIdle, "chaos-idle", 0, "idle bound of the chaos.idle case's cutting proxy (default 16s)")
	f.IntVar(&o.chaosLanes, "chaos-lanes", 1, "turns streaming at once in each chaos case, each through its own proxy and client")
	_ = cmd.RegisterFlagCompletionFunc("target", cobra.FixedCompletions(boxTargets, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("report", cobra.FixedCompletions(reportFormats, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// resolve checks the flags and finds the Router; getenv reads the
// environment.
func (o *conformanceOptions) resolve(getenv func(string) string) error {
	if o.list {
		return nil
	}
	if err := checkBoxTarget(o.target); err != nil {
		return err
	}
	switch {
	case !slices.Contains(reportFormats, o.report):
		return usageErrorf("--report %q: want %s", o.report, strings.Join(reportFormats, ", "))
	case o.image != "" && o.buildRecord != "":
		return usageErrorf("--image and --build-record exclude each other")
	case o.parallel < 1:
		return usageErrorf("--parallel %d: want at least 1", o.parallel)
	case o.caseTimeout <= 0 || o.readyTimeout <= 0:
		return usageErrorf("--case-timeout and --ready-timeout must be positive")
	case slices.ContainsFunc(o.reportFiles, func(f string) bool { _, file := conformance.ParseReportFile(f, o.report); return file == "" }):
		return usageErrorf("--report-file: want [FORMAT=]FILE with FORMAT one of %s", strings.Join(reportFormats, ", "))
	case o.gitRef != "" && o.repo == "":
		return usageErrorf("--git-ref goes with --repo")
	case strings.HasPrefix(o.repo, "-") || strings.HasPrefix(o.gitRef, "-"):
		return usageErrorf("--repo and --git-ref must not start with '-'")
	}
	if _, err := conformance.SelectFrom(conformance.Catalogue(o.chaos), o.cases); err != nil {
		return usageErrorf("--run: %w", err)
	}
	if o.target == "e2b" && getenv(open.EnvE2BDial) != "" {
		o.emulated = true // boxctl emulate e2b points the client here
	}
	var err error
	o.routerURL, o.routerKey, err = routerFromFlag(o.router, getenv)
	return err
}
