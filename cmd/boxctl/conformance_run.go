package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

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
	stopSecurity, err := conformance.PrepareSecurity(ctx, &t, o.cases, o.chaos, a.log)
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
