// Command boxctl builds box images, runs coding-agent turns in boxes and
// checks that a built image still works. See the README for a tour.
//
// boxctl is the application over the SDK (the bridge, provider,
// provider/sandbox, vendors, boximage, pins and conformance packages,
// which a Go program imports directly). What only the program needs lives
// under cmd/boxctl/internal, which nothing else may import: the user's
// state file (boxstate), the pool keepers (pool), the user's credential
// broker process (localbroker), the local model endpoint's processes
// (localrouter), the web inspector (inspector) and what is printed for a
// person (render, turntext). The commands here parse flags, resolve what
// they name, call into those and the SDK, and render the result.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tangle-network/boxctl/boximage"
	"github.com/tangle-network/boxctl/bridge"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/internal/tracing"
	"github.com/tangle-network/boxctl/vendors/open"
)

func main() {
	quietClientGo()
	// `boxctl bridge` runs its relays and launchers through this executable.
	bridge.ServeHelpersIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Spans go to OTEL_EXPORTER_OTLP_ENDPOINT when it is set, nowhere
	// otherwise.
	shutdown, terr := tracing.Setup(ctx, "boxctl", os.Getenv)
	if terr != nil {
		fmt.Fprintln(os.Stderr, "boxctl:", terr)
	}
	err := newRootCmd(newApp(os.Stdout, os.Stderr)).ExecuteContext(ctx)
	stop()
	if shutdown != nil {
		_ = shutdown()
	}
	os.Exit(exitCode(err))
}

// usageError marks a mistake in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode maps an error to the process exit status: 0 ok, 2 usage (the
// libraries' errors of how they were asked included), 130 interrupted, a
// command's own status for `exec`, 1 anything else. cobra has already
// printed the error.
func exitCode(err error) int {
	var ue usageError
	var se exitStatusError
	var ae *boxstate.ArgError
	var ce *open.ConfigError
	var pe *boximage.PublishConfigError
	var ee *boximage.EngineError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue), errors.As(err, &ae), errors.As(err, &ce), errors.As(err, &pe), errors.As(err, &ee):
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	default:
		return 1
	}
}
