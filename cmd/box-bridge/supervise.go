package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge"
	"github.com/tangle-network/boxctl/bridge/supervisor"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// The supervisor's crash loop bound, from its environment.
const (
	EnvMaxCrashes  = "BRIDGE_MAX_CRASHES"
	EnvCrashWindow = "BRIDGE_CRASH_WINDOW_MS"
)

// supervisedArg, first in a child's arguments, makes box-bridge take its
// listener and secrets from its supervisor.
const supervisedArg = "-supervised"

// secretVars are the variables a supervisor keeps from its child's
// environment and hands over instead.
var secretVars = []string{wire.EnvBearer, wire.EnvRouterKey}

// overlay returns getenv with the variables of secrets answered from it.
func overlay(getenv func(string) string, secrets map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := secrets[k]; ok {
			return v
		}
		return getenv(k)
	}
}

// runSupervisor listens where the bridge would, takes the secrets out of
// this process's environment, and supervises the serving bridge (this
// executable, -supervised, with the same flags but -supervise).
func runSupervisor(ctx context.Context, cfg bridge.Config, args []string, getenv func(string) string, out, errOut io.Writer, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The crash loop's bound: EnvMaxCrashes crashes within EnvCrashWindow
	// milliseconds (default supervisor.DefaultMaxCrashes in
	// supervisor.DefaultWindow).
	var maxCrashes int
	var window time.Duration
	for _, v := range []struct {
		name string
		set  func(int)
	}{{EnvMaxCrashes, func(n int) { maxCrashes = n }}, {EnvCrashWindow, func(n int) { window = time.Duration(n) * time.Millisecond }}} {
		if s := getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return fmt.Errorf("%s=%q: want a positive integer: %w", v.name, s, errUsage)
			}
			v.set(n)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("supervise: %w", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	secrets := map[string]string{wire.EnvBearer: cfg.Bearer, wire.EnvRouterKey: cfg.RouterKey}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(secretVars, k)
	})
	for _, k := range secretVars {
		_ = os.Unsetenv(k)
	}
	childArgs := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		a = strings.TrimLeft(a, "-")
		return a == "supervise" || strings.HasPrefix(a, "supervise=")
	})
	var backends []string
	adapters := bridge.Adapters()
	for _, k := range cfg.Backends {
		backends = append(backends, adapters[k].Name())
	}
	log.Info("supervising", "addr", ln.Addr().String())
	return supervisor.Run(ctx, supervisor.Options{Listener: ln.(*net.TCPListener),
		Command: append([]string{exe, supervisedArg}, childArgs...), Env: env, Secrets: secrets,
		Stdout: out, Stderr: errOut, Log: log, Backends: backends, MaxCrashes: maxCrashes, Window: window})
}
