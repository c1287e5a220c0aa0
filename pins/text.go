package pins

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes p as text tables: the base image by digest with its
// Debian packages, Node and npm, the bridge, then a row per harness with
// its backend, npm package, version, platform packages and whether (and on
// which vendors) a conformance run proved it.
func (p *Pins) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var debs []string
	for _, d := range p.Base.Packages {
		debs = append(debs, d.Name+"="+d.Version)
	}
	fmt.Fprintf(tw, "base\t%s\t%s\n", p.Base.Image(), strings.Join(debs, " "))
	fmt.Fprintf(tw, "node\t%s\tnpm %s\n", p.Node.Version, p.Node.NPM.Version)
	fmt.Fprintf(tw, "bridge\t%s\t%s\n", p.Bridge.Version, p.Bridge.Commit)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HARNESS\tBACKEND\tPACKAGE\tVERSION\tPLATFORMS\tPROVEN")
	for _, h := range p.Harnesses {
		var plats []string
		for _, pkg := range h.Platforms {
			plats = append(plats, pkg.Platform)
		}
		if len(plats) == 0 {
			plats = []string{"-"}
		}
		proven := fmt.Sprint(h.Proven)
		if len(h.ProvenBy) > 0 {
			var by []string
			for _, pr := range h.ProvenBy {
				by = append(by, pr.Vendor)
			}
			proven += " (" + strings.Join(by, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.Backend, h.Package, h.Version, strings.Join(plats, ","), proven)
	}
	return tw.Flush()
}

// WriteChecks writes what Verify found as a text table, a row per check:
// "ok", or "FAIL: " and why.
func WriteChecks(w io.Writer, checks []Check) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tPACKAGE\tVERSION\tPLATFORM\tRESULT")
	for _, c := range checks {
		res := "ok"
		if !c.OK() {
			res = "FAIL: " + c.Error
		}
		plat := c.Platform
		if plat == "" {
			plat = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Subject, c.Package, c.Version, plat, res)
	}
	return tw.Flush()
}
