// Command box-bridge is the bridge server that runs inside every box: it
// runs coding-agent CLIs per turn and serves their events durably over the
// bridge wire protocol. Configuration comes from the environment
// (BRIDGE_HOST, BRIDGE_PORT, BRIDGE_BEARER, BRIDGE_DATA_DIR,
// BRIDGE_BACKENDS, <KEY>_BIN, <KEY>_TIMEOUT_MS, TANGLE_API_KEY,
// TANGLE_ROUTER_URL); flags override it. Run with -h for the flags.
//
// With -supervise it is its own supervisor (package bridge/supervisor):
// it listens, keeps the secrets in its memory, and runs the serving bridge
// as its child, started again after a crash. The child is this executable
// with -supervised as its first argument.
//
// With --standby it waits in a warm pool, holding no secret, until a claim
// authenticated by the pool token on its stdin hands it its bearer and
// Router (POST /v1/claim).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tangle-network/boxctl/bridge"
	"github.com/tangle-network/boxctl/bridge/supervisor"
	"github.com/tangle-network/boxctl/internal/buildinfo"
	"github.com/tangle-network/boxctl/internal/tracing"
)

func main() {
	// Relays and launchers the bridge starts are this executable.
	bridge.ServeHelpersIfAsked()
	if err := protectSecrets(); err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge: protect secrets:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		if err != errUsage { // a usage error that says what is wrong
			fmt.Fprintln(os.Stderr, "box-bridge:", err)
		}
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "box-bridge:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, out, errOut io.Writer) error {
	var child *supervisor.Child
	if len(args) > 0 && args[0] == supervisedArg {
		var err error
		if child, err = supervisor.Receive(); err != nil {
			return err
		}
		args, getenv = args[1:], overlay(getenv, child.Secrets)
	}
	cfg, err := bridge.ConfigFromEnv(getenv)
	if err != nil {
		fmt.Fprintln(errOut, "box-bridge:", err)
		return errUsage
	}
	fs := flag.NewFlagSet("box-bridge", flag.ContinueOnError)
	fs.SetOutput(errOut)
	version := fs.Bool("version", false, "print the version and exit")
	supervise := fs.Bool("supervise", false, "run the serving bridge as a child, restarted after a crash, with the secrets held by this process")
	standby := fs.Bool("standby", false, "wait in a pool until claimed with the one-time pool token read from stdin")
	secrets := cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if *version {
		fmt.Fprintf(out, "box-bridge %s\n", buildinfo.Get())
		return nil
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errOut, "box-bridge: unexpected arguments %q\n", fs.Args())
		return errUsage
	}
	if err := secrets.Load(&cfg); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintf(errOut, "box-bridge: -log-level %q: want debug, info, warn or error\n", cfg.LogLevel)
		return errUsage
	}
	log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: level}))
	if *supervise && *standby {
		return fmt.Errorf("-standby runs unsupervised: give one of -supervise and -standby: %w", errUsage)
	}
	if *supervise {
		if child != nil {
			return fmt.Errorf("-supervise in a supervised bridge: %w", errUsage)
		}
		return runSupervisor(ctx, cfg, args, getenv, out, errOut, log.With("component", "supervisor"))
	}
	if child != nil {
		cfg.Listener = child.Listener
	}
	// Spans go to OTEL_EXPORTER_OTLP_ENDPOINT when it is set (nowhere
	// otherwise); what is buffered is sent before the process ends.
	shutdown, err := tracing.Setup(ctx, "box-bridge", getenv)
	if err != nil {
		return err
	}
	defer func() {
		if err := shutdown(); err != nil {
			log.Warn("flush spans", "err", err)
		}
	}()
	if *standby {
		token, err := readPoolToken(stdin)
		if err != nil {
			return err
		}
		return bridge.ServeStandby(ctx, cfg, token, log, nil)
	}
	return bridge.Serve(ctx, cfg, log, nil)
}

// readPoolToken reads the pool token, the first line of r.
func readPoolToken(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the pool token: %w", err)
	}
	token := strings.TrimSpace(line)
	if token == "" {
		return "", errors.New("--standby: no pool token on stdin")
	}
	return token, nil
}
