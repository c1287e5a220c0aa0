package main

import (
	"context"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/open"
)

// boxTargets are the vendors the box verbs (up, turn, exec, logs, ls, rm,
// gc) drive.
var boxTargets = open.Targets

// quietClientGo stops client-go's own reports: it also reports through
// klog, straight to stderr, what it returns as errors (a closed stream of
// a cancelled exec, say), and boxctl reports those errors itself. main
// calls it before any client runs.
func quietClientGo() { klog.SetLogger(logr.Discard()) }

func checkBoxTarget(target string) error { return open.CheckTarget(target) }

// openVendor connects to the vendor of target. The caller closes it.
func (a *app) openVendor(target string) (vendors.Vendor, func(), error) {
	v, err := open.Vendor(target, open.Options{Logger: a.log})
	if err != nil {
		return nil, nil, err
	}
	return v, func() { _ = v.Close() }, nil
}

// openState returns the user's state store.
func (a *app) openState() (*boxstate.Store, error) {
	var s *boxstate.Store
	s, err := boxstate.Open(boxstate.Options{Logger: a.log, Gates: a.recordGate(&s)})
	return s, err
}

// readState opens the state store and reads it.
func (a *app) readState() (*boxstate.Store, *boxstate.State, error) {
	s, err := a.openState()
	if err != nil {
		return nil, nil, err
	}
	st, err := s.Load()
	return s, st, err
}

// shortID is the 12-character form of a box id that listings print.
func shortID(id string) string { return boxstate.ShortID(id) }

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

// boxArgs checks a command's positional arguments, a wrong number of them
// being a usage error (exit 2).
func boxArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
