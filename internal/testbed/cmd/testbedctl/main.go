package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbedctl:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// subcommands are testbedctl's subcommands.
var subcommands = []string{"dir", "write-state", "kube-pki", "kubeconfig", "cni-conf", "pod-subnet-check", "push-base", "save-image", "wait-buildkit"}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("want a subcommand: %s: %w", strings.Join(subcommands, ", "), flag.ErrHelp)
	}
	switch args[0] {
	case "dir":
		return printDir(args[1:], stdout)
	case "write-state":
		return writeState(args[1:], time.Now)
	case "kube-pki":
		return kubePKI(args[1:], stdout)
	case "kubeconfig":
		return kubeconfig(args[1:])
	case "cni-conf":
		return cniConf(args[1:])
	case "pod-subnet-check":
		return podSubnetCheck(args[1:], stdin)
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
