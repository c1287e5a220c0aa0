package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/testbed"
)

// printDir prints the test bed's state directory (testbed.Dir), the one
// place it is computed: scripts/testbed and scripts/run ask for it.
func printDir(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dir", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("dir takes no arguments: %w", flag.ErrHelp)
	}
	_, err := fmt.Fprintln(stdout, testbed.Dir())
	return err
}

// writeState writes the state file from KEY=VALUE arguments, keeping the
// previous file's other keys (testbed.WriteState).
func writeState(args []string, now func() time.Time) error {
	fs := flag.NewFlagSet("write-state", flag.ContinueOnError)
	file := fs.String("file", "", "the state file, DIR/"+testbed.StateFileName)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() == 0 {
		return fmt.Errorf("write-state needs -file and KEY=VALUE arguments: %w", flag.ErrHelp)
	}
	vals := map[string]string{}
	for _, a := range fs.Args() {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("write-state: %q is not KEY=VALUE: %w", a, flag.ErrHelp)
		}
		vals[k] = v
	}
	header := "written by scripts/testbed up at " + now().UTC().Format(time.RFC3339) + "; read by internal/testbed"
	return testbed.WriteState(*file, vals, header)
}
