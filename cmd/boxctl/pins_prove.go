package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/conformance"
	"github.com/tangle-network/boxctl/pins"
)

// proveResult is what pins prove reports.
type proveResult struct {
	Harness string     `json:"harness"`
	Version string     `json:"version"`
	Proof   pins.Proof `json:"proof"`
	Dir     string     `json:"dir"`
}

func newPinsProveCmd(a *app, o *pinsOptions) *cobra.Command {
	var report string
	cmd := &cobra.Command{
		Use:   "prove <harness> --report FILE",
		Short: "Mark a harness proven by a green conformance report from a real box",
		Long: `prove reads a JSON conformance report (boxctl conformance --report json) and
marks the harness (by name or backend key) proven in the pins directory (--dir,
default ./pins), recording the vendor and image digest that proved it. It
refuses a report that ran on an emulator, names no image digest, ran another
version than the pin, skipped a case of the suite, or has a failed case for the
harness. boxctl build without --harness installs the proven harnesses; rebuild
boxctl to embed the result.`,
		Example: `  boxctl conformance --router local --build-record record.json --report json --report-file report.json
  boxctl pins prove claude-code --report report.json`,
		Args: boxArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if report == "" {
				return usageErrorf("prove: --report FILE is required")
			}
			dir := o.dir
			if dir == "" {
				dir = "pins"
			}
			p, err := pins.LoadDir(dir)
			if err != nil {
				return err
			}
			f, err := os.Open(report)
			if err != nil {
				return usageErrorf("--report: %w", err)
			}
			rep, err := conformance.ReadReport(f)
			f.Close()
			if err != nil {
				return usageErrorf("--report %s: %w", report, err)
			}
			proof, err := conformance.ProofFor(rep, args[0], p)
			if errors.Is(err, pins.ErrUnknownHarness) {
				return usageErrorf("prove: %w", &pins.UnknownHarnessError{Name: args[0], Known: p.HarnessNames()})
			}
			if err != nil {
				return err
			}
			np, err := p.Prove(args[0], proof)
			if err != nil {
				return err
			}
			if err := pins.Save(dir, np); err != nil {
				return err
			}
			h, _ := np.Harness(args[0])
			res := proveResult{Harness: h.Name, Version: h.Version, Proof: proof, Dir: dir}
			return a.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s %s: proven on %s by image %s (%d cases passed); wrote %s\n",
					res.Harness, res.Version, proof.Vendor, proof.ImageDigest, proof.Cases, dir)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&report, "report", "", "JSON conformance report (boxctl conformance --report json)")
	return cmd
}
