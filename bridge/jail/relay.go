package jail

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// RelayArg is the first argument that makes the bridge's executable the
// in-jail relay of a net jail: `<exe> RelayArg LISTEN SOCKET CMD ARGS...`.
const RelayArg = "__box-bridge-netjail-relay"

// ServeRelayIfAsked runs the relay and exits when this process was started
// as one (os.Args[1] is RelayArg), or launches an exact process when it
// was started as its launcher (LimitArg, see ServeLimitIfAsked); otherwise
// it returns at once. A main that serves the bridge calls it first.
func ServeRelayIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == RelayArg {
		os.Exit(RunRelay(os.Args[2:]))
	}
	ServeLimitIfAsked()
}

// RunRelay is the relay inside a net jail: it listens on LISTEN (the model
// endpoint's address in the jail's own network), runs CMD with this
// process's standard streams and environment, carries every connection to
// LISTEN over the Unix socket SOCKET to the bridge's forwarder, and
// returns CMD's exit status once CMD has exited (128+n for signal n).
//
// The relay catches SIGTERM, SIGINT and SIGHUP without acting on them: a
// stop reaches the harness through its process group, and the relay must
// outlive a harness that finishes its turn after a SIGTERM.
func RunRelay(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "box-bridge net-jail relay: want LISTEN SOCKET CMD [ARGS...]")
		return 125
	}
	listen, sock, argv := args[0], args[1], args[2:]
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "box-bridge net-jail relay:", err)
		return 125
	}
	defer ln.Close()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				out, err := net.Dial("unix", sock)
				if err != nil {
					in.Close()
					return
				}
				pipe(in, out)
			}()
		}
	}()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintln(os.Stderr, "box-bridge net-jail relay:", err)
			return 127
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 0
}
