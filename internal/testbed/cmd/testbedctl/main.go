package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbedctl:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("want a subcommand: push-base, save-image or wait-buildkit: %w", flag.ErrHelp)
	}
	switch args[0] {
	case "push-base":
		return pushBase(ctx, args[1:], stdout)
	case "save-image":
		return saveImage(args[1:])
	case "wait-buildkit":
		return waitBuildkit(ctx, args[1:])
	default:
		return fmt.Errorf("unknown subcommand %q: %w", args[0], flag.ErrHelp)
	}
}
