// Command release writes boxctl's release files (package
// internal/release): `make release` runs it as
//
//	SOURCE_DATE_EPOCH=<commit time> go run ./internal/release/cmd/release \
//		-version V -commit C -ldflags '<the Makefile's LDFLAGS>' -out dist
//
// and it prints each file written with its size and SHA-256 digest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	opts := release.Options{Log: errOut}
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&opts.Dir, "dir", ".", "the module's root")
	fs.StringVar(&opts.Out, "out", "dist", "directory the files go to")
	fs.StringVar(&opts.Version, "version", "", "release version, e.g. v1.2.0 (required)")
	fs.StringVar(&opts.Commit, "commit", "", "commit built, recorded in the SBOM")
	fs.StringVar(&opts.LDFlags, "ldflags", "", "go build -ldflags (the Makefile's, which stamp version and commit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	epoch := getenv("SOURCE_DATE_EPOCH")
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || sec <= 0 {
		return fmt.Errorf("SOURCE_DATE_EPOCH %q: want the commit's time in seconds since 1970 (git log -1 --format=%%ct)", epoch)
	}
	opts.Time = time.Unix(sec, 0)
	files, err := release.Run(ctx, opts)
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, err := fmt.Fprintf(out, "%10d  %s  %s\n", f.Size, f.SHA256[:16], f.Name); err != nil {
			return err
		}
	}
	return nil
}
