package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/render"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/emukit"
	"github.com/tangle-network/boxctl/vendors/open"
)

// resolveImage finds the image, its digest and the record's harnesses.
func (o *conformanceOptions) resolveImage(ctx context.Context, a *app) (conformance.Image, error) {
	src := conformance.ImageSource{BuildRecord: o.buildRecord, Image: o.image, Vendor: o.target}
	if o.buildRecord == "" && o.image == "" {
		_, st, err := a.readState()
		if err != nil {
			return conformance.Image{}, err
		}
		if lb := st.LastBuild; lb != nil {
			src.Last = &conformance.Built{Target: lb.Target, Image: lb.Image, Digest: lb.Digest}
		}
	}
	img, err := conformance.ResolveImage(ctx, src, a.log)
	if err != nil {
		return img, usageError{err}
	}
	return img, nil
}

// chaosOptions are the chaos family's options; on an emulator they set
// t's fault switch too (boxctl emulate's), for the chaos.vendor case.
func (o *conformanceOptions) chaosOptions(t *conformance.Target) *conformance.Chaos {
	if !o.chaos {
		return nil
	}
	if cp, ok := open.EmulatorControlPlane(o.target, open.Options{}); ok && o.emulated {
		if sw, err := emukit.NewSwitch(cp.URL, cp.Header, cp.Value, nil); err == nil {
			t.Faults = sw
		}
	}
	return &conformance.Chaos{Faults: o.faults, Idle: o.chaosIdle, Lanes: o.chaosLanes}
}

func runConformance(ctx context.Context, a *app, o *conformanceOptions) error {
	if o.list {
		return listCases(a, o.chaos)
	}
	img, err := o.resolveImage(ctx, a)
	if err != nil {
		return err
	}
	harnesses := o.harnesses
	if len(harnesses) == 0 {
		harnesses = img.Harnesses
	}
	v, closeVendor, err := a.openVendor(o.target)
	if err != nil {
		return err
	}
	defer closeVendor()
	t := conformance.Target{Vendor: v, Image: img.Reference, ImageDigest: img.Digest, Emulated: o.emulated,
		Router: sandbox.Router{URL: o.routerURL, Key: o.routerKey}}
	if o.repo != "" {
		t.Repo = &conformance.Repo{URL: o.repo, GitRef: o.gitRef}
	}
	if o.router == routerLocal {
		stop, err := a.useLocal(ctx, v, &t)
		if err != nil {
			return err
		}
		defer stop()
	}
	stopSecurity, err := a.useSecurity(ctx, o, v, &t)
	if err != nil {
		return err
	}
	defer stopSecurity()
	chaos := o.chaosOptions(&t)
	view := render.NewProgressView(a.errOut, render.IsTerminal(a.errOut))
	a.log.Info("running the conformance suite", "target", o.target, "image", img.Reference, "harnesses", harnesses)
	rep, runErr := conformance.Run(ctx, t, conformance.Options{Harnesses: harnesses, Cases: o.cases, Parallel: o.parallel,
		CaseTimeout: o.caseTimeout, ReadyTimeout: o.readyTimeout, Progress: view.Update, Logger: a.log, Chaos: chaos})
	view.Close()
	if rep == nil {
		return usageError{runErr}
	}
	if err := o.writeReport(a, rep); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return runErr
	}
	if rep.Failed() {
		return fmt.Errorf("conformance: %d of %d cases failed", rep.Summary.Fail, len(rep.Results))
	}
	return nil
}

// useLocal makes the local model endpoint, served where v's boxes reach
// this machine, t's model endpoint; stop ends it.
func (a *app) useLocal(ctx context.Context, v vendors.Vendor, t *conformance.Target) (stop func(), err error) {
	host, err := localHost(ctx, v)
	if err != nil {
		return nil, err
	}
	l, err := conformance.StartLocal(host)
	if err != nil {
		return nil, err
	}
	t.Local, t.Router = l, sandbox.Router{}
	a.log.Info("local model endpoint started", "url", l.Router.URL)
	return func() { _ = l.Close() }, nil
}

// useSecurity sets up t.Security when the run selects a security case:
// the suite's listeners on this machine's Docker engine and, on a vendor
// whose boxes boxctl confines itself (Docker), a gate of this process on
// its confined network that resolves the suite's names, in front of a
// broker this process serves. A vendor that confines its own boxes (the
// emulators, run by boxctl emulate) resolves names its own way: its boxes
// are allowed the suite's hosts by address.
func (a *app) useSecurity(ctx context.Context, o *conformanceOptions, v vendors.Vendor, t *conformance.Target) (stop func(), err error) {
	cases, err := conformance.SelectFrom(conformance.Catalogue(o.chaos), o.cases)
	if err != nil || !slices.ContainsFunc(cases, func(c conformance.Case) bool { return c.Group() == "security" }) {
		return func() {}, nil // Run reports a bad selection
	}
	_, own := v.(vendors.EgressEnforcer)
	if own && !o.emulated {
		return func() {}, nil // its boxes do not reach this machine: the cases say so
	}
	sec, err := conformance.StartSecurity(ctx, "")
	if err != nil {
		a.log.Warn("security cases: no listeners on this machine's Docker engine: they do not apply", "err", err)
		return func() {}, nil
	}
	stops := []func(){func() { _ = sec.Close() }}
	stop = func() {
		for _, s := range slices.Backward(stops) {
			s()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	t.Security = sec
	if own || !v.Supports()[vendors.FieldEgress] {
		return stop, nil
	}
	stopBroker, err := conformance.ServeBroker(ctx, t, a.log)
	if err != nil {
		return nil, fmt.Errorf("security cases: a broker where the boxes reach this machine: %w", err)
	}
	stops = append(stops, stopBroker)
	g, err := sandbox.StartEgress(ctx, v, sandbox.EgressOptions{BrokerURL: t.BrokerURL, Resolver: sec.Resolver(), Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("security cases: the egress gate of %s's confined network: %w", v.Name(), err)
	}
	stops = append(stops, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		// The rules stay: another box on the confined network stays
		// confined (to the broker) until the next gate takes over.
		_ = g.Close(cctx)
	})
	sec.Gate, sec.Names = g, true
	return stop, nil
}

// writeReport writes the report: to each --report-file, with the summary
// table on stdout; else in the --report format to stdout, with the
// summary table on stderr when that format is not text.
func (o *conformanceOptions) writeReport(a *app, rep *conformance.Report) error {
	if len(o.reportFiles) == 0 {
		if o.report != conformance.FormatText {
			if err := rep.WriteSummary(a.errOut); err != nil {
				return err
			}
		}
		return rep.Write(a.out, o.report)
	}
	for _, v := range o.reportFiles {
		format, name := conformance.ParseReportFile(v, o.report)
		if err := rep.WriteFile(name, format); err != nil {
			return err
		}
	}
	return rep.WriteSummary(a.out)
}

// listCases prints the catalogue.
// listCases prints the catalogue, or with chaos the chaos family.
func listCases(a *app, chaos bool) error {
	type row struct {
		ID          string `json:"id"`
		Description string `json:"description"`
	}
	var rows []row
	for _, c := range conformance.Catalogue(chaos) {
		rows = append(rows, row{c.ID, c.Description})
	}
	return a.print(rows, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CASE\tDESCRIPTION")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", r.ID, r.Description)
		}
		return tw.Flush()
	})
}
