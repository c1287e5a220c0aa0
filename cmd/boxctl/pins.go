package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/pins"
)

type pinsOptions struct {
	dir      string // empty: the embedded pins
	registry string // empty: $NPM_CONFIG_REGISTRY or the public registry
}

func (o *pinsOptions) load() (*pins.Pins, error) {
	if o.dir == "" {
		return pins.Load()
	}
	return pins.LoadDir(o.dir)
}

func (o *pinsOptions) client(a *app) (*pins.Registry, error) {
	url := o.registry
	if url == "" {
		url = pins.RegistryFromEnv(os.Getenv)
	}
	reg, err := pins.NewRegistry(url, pins.WithLogger(a.log))
	if err != nil {
		return nil, usageError{err}
	}
	return reg, nil
}

func newPinsCmd(a *app) *cobra.Command {
	o := &pinsOptions{}
	cmd := &cobra.Command{
		Use:   "pins",
		Short: "Show the pinned base image, Node, bridge and harness CLI versions",
		Long: `pins prints the versions box images are built from: the base image by digest,
Node and npm, the bridge (this binary's own build) and each harness CLI with its
npm package, exact version, integrity and whether a conformance run proved it.`,
		Args: boxArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			p, err := o.load()
			if err != nil {
				return err
			}
			return a.print(p, func(w io.Writer) error { return p.WriteTable(w) })
		},
	}
	cmd.PersistentFlags().StringVar(&o.dir, "dir", "", "read the pins from this directory (pins.json and locks/) instead of the embedded ones")
	cmd.PersistentFlags().StringVar(&o.registry, "registry", "", "npm registry URL (default $NPM_CONFIG_REGISTRY, else "+pins.DefaultRegistry+")")
	cmd.AddCommand(newPinsVerifyCmd(a, o), newPinsBumpCmd(a, o), newPinsProveCmd(a, o))
	return cmd
}

func newPinsVerifyCmd(a *app, o *pinsOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check that every pinned npm version exists in the registry with the pinned integrity",
		Args:  boxArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.load()
			if err != nil {
				return err
			}
			reg, err := o.client(a)
			if err != nil {
				return err
			}
			checks, verr := pins.Verify(cmd.Context(), p, reg)
			if errors.Is(verr, cmd.Context().Err()) && cmd.Context().Err() != nil {
				return verr
			}
			perr := a.print(checks, func(w io.Writer) error { return pins.WriteChecks(w, checks) })
			return errors.Join(verr, perr)
		},
	}
}

// bumpResult is what pins bump reports.
type bumpResult struct {
	Harness   string `json:"harness"`
	From      string `json:"from"`
	To        string `json:"to"`
	Integrity string `json:"integrity"`
	Locked    int    `json:"lockedPackages"`
	Proven    bool   `json:"proven"`
	Dir       string `json:"dir"`
}

func newPinsBumpCmd(a *app, o *pinsOptions) *cobra.Command {
	var npm string
	cmd := &cobra.Command{
		Use:   "bump <harness> [version]",
		Short: "Move a harness to a new version: integrity and lock from the registry, marked unproven",
		Long: `bump sets a harness (by name or backend key) to a version or dist-tag (default
latest): it reads the version's integrity and its platform packages' from the
npm registry, resolves its complete dependency tree with npm into
locks/<harness>.json, marks the row unproven, and rewrites the pins directory
(--dir, default ./pins). Rebuild boxctl to embed the result.`,
		Example: `  boxctl pins bump pi
  boxctl pins bump claude 2.1.340 --dir pins`,
		Args: boxArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := o.dir
			if dir == "" {
				dir = "pins"
			}
			p, err := pins.LoadDir(dir)
			if err != nil {
				return err
			}
			h, ok := p.Harness(args[0])
			if !ok {
				return usageErrorf("bump: %w", &pins.UnknownHarnessError{Name: args[0], Known: p.HarnessNames()})
			}
			version := ""
			if len(args) == 2 {
				version = args[1]
			}
			reg, err := o.client(a)
			if err != nil {
				return err
			}
			a.log.Info("resolving", "harness", h.Name, "package", h.Package, "version", cmp.Or(version, "latest"), "registry", reg.URL())
			locker := pins.NPMLocker{NPM: npm, Registry: reg.URL(), Stderr: a.errOut}
			np, err := pins.Bump(cmd.Context(), p, h.Name, version, reg, locker)
			if err != nil {
				return err
			}
			if err := pins.Save(dir, np); err != nil {
				return err
			}
			nh, _ := np.Harness(h.Name)
			res := bumpResult{Harness: nh.Name, From: h.Version, To: nh.Version, Integrity: nh.Integrity,
				Locked: len(nh.Lock.Packages), Proven: nh.Proven, Dir: dir}
			return a.print(res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s: %s -> %s (%d locked packages, unproven); wrote %s\n",
					res.Harness, res.From, res.To, res.Locked, dir)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&npm, "npm", "npm", "npm executable that resolves the dependency tree")
	return cmd
}
