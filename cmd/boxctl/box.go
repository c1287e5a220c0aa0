package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/e2b"
	"github.com/tangle-network/boxctl/vendors/kubernetes"
)

// boxTargets are the vendors the box verbs (up, turn, exec, logs, ls, rm,
// gc) drive.
var boxTargets = []string{docker.Name, e2b.Name, daytona.Name, kubernetes.Name}

func checkBoxTarget(target string) error {
	if !slices.Contains(boxTargets, target) {
		return usageErrorf("--target %q: boxes run on %s (more vendors are coming)", target, strings.Join(boxTargets, ", "))
	}
	return nil
}

// openVendor connects to the vendor of target. The caller closes it.
func (a *app) openVendor(target string) (vendors.Vendor, func(), error) {
	if err := checkBoxTarget(target); err != nil {
		return nil, nil, err
	}
	switch target {
	case e2b.Name:
		v, err := newE2B(a, "")
		if err != nil {
			return nil, nil, err
		}
		return v, func() { _ = v.Close() }, nil
	case daytona.Name:
		v, err := newDaytona(a, "")
		if err != nil {
			return nil, nil, err
		}
		return v, func() { _ = v.Close() }, nil
	case kubernetes.Name:
		v, err := newKubernetes(a)
		if err != nil {
			return nil, nil, err
		}
		return v, func() { _ = v.Close() }, nil
	}
	v, err := docker.New(docker.WithLogger(a.log))
	if err != nil {
		return nil, nil, err
	}
	return v, func() { _ = v.Close() }, nil
}

// buildTargetOf is the `boxctl build --target` whose image boxes of the
// box target run: a cluster pulls what a registry holds.
func buildTargetOf(target string) string {
	if target == kubernetes.Name {
		return boximage.TargetRegistry
	}
	return target
}

// stateUser is the user whose state owns the boxes of `boxctl up`: their
// owner label is sandbox.UserOwner(stateUser()).
func stateUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}

// stateOwner is the owner label of the boxes this state file keeps: the
// user's name, and for a state file other than ~/.local/state/boxctl's
// (XDG_STATE_HOME, BOXCTL_STATE) a digest of its path too, so that gc
// with one state never judges the boxes another state keeps.
func stateOwner() string {
	name := stateUser()
	p, err := statePath()
	if err == nil {
		p, err = filepath.Abs(p)
	}
	home, herr := os.UserHomeDir()
	if err == nil && (herr != nil || p != homeStatePath(home)) {
		sum := sha256.Sum256([]byte(p))
		name += "+" + hex.EncodeToString(sum[:4])
	}
	return sandbox.UserOwner(name)
}

// resolveVendorBox finds the box arg names: in the state (see resolveBox),
// else among the vendor's boxes by id or unique prefix, for a box the
// state does not know (rec is then nil).
func resolveVendorBox(ctx context.Context, st *boxState, v vendors.Vendor, arg string) (id string, rec *boxRecord, err error) {
	rec, err = st.resolveBox(arg)
	if err == nil {
		return rec.ID, rec, nil
	}
	var nb *noBoxError
	if !errors.As(err, &nb) {
		return "", nil, err
	}
	infos, lerr := v.List(ctx, nil)
	if lerr != nil {
		return "", nil, lerr
	}
	ids := make([]string, len(infos))
	for i, b := range infos {
		ids[i] = b.ID
	}
	if id, merr := matchID(arg, ids); merr == nil {
		return id, nil, nil
	}
	return "", nil, fmt.Errorf("no box %q in the state nor on %s (boxctl ls lists them)", arg, v.Name())
}

// connectBox drives a box of the state again from its reference.
func (a *app) connectBox(ctx context.Context, v vendors.Vendor, rec *boxRecord) (*sandbox.Environment, error) {
	if rec.Reference == nil {
		return nil, fmt.Errorf("box %s: the state holds no reference to it", shortID(rec.ID))
	}
	p, err := sandbox.New(sandbox.Options{Vendor: v, Image: rec.Image, Logger: a.log})
	if err != nil {
		return nil, err
	}
	env, err := p.Connect(ctx, *rec.Reference)
	if errors.Is(err, vendors.ErrNotFound) {
		return nil, fmt.Errorf("box %s is gone (past its deadline, or removed): `boxctl gc` forgets it: %w", shortID(rec.ID), err)
	}
	return env, err
}

// verbRunE is a box verb's RunE: prepare reads the arguments into o and
// checks them, then runF (a test's, when not nil) or run gets o.
func verbRunE[T any](a *app, o T, prepare func(args []string) error,
	runF func(context.Context, T) error, run func(context.Context, *app, T) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := prepare(args); err != nil {
			return err
		}
		if runF != nil {
			return runF(cmd.Context(), o)
		}
		return run(cmd.Context(), a, o)
	}
}

// openStateVendor reads the state and connects to the vendor of target;
// the caller calls closeVendor.
func (a *app) openStateVendor(target string) (sf stateFile, st *boxState, v vendors.Vendor, closeVendor func(), err error) {
	if sf, st, err = readState(); err != nil {
		return sf, nil, nil, nil, err
	}
	v, closeVendor, err = a.openVendor(target)
	return sf, st, v, closeVendor, err
}

// boxArgs checks a command's positional arguments, as a usage error.
func boxArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
