package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox/localrouter"
	"github.com/tangle-network/boxctl/vendors"
)

// localReply is what the local model endpoint of `up --router local`
// answers every model request with.
const localReply = "Hello from inside the box: the local model endpoint answered."

// hostAddresser is a vendor that knows where a server on this machine is
// reachable from its boxes (docker.Vendor.HostAddress).
type hostAddresser interface {
	HostAddress(ctx context.Context) (string, error)
}

// localHost is where the vendor's boxes reach a server on this machine,
// for --router local.
func localHost(ctx context.Context, v vendors.Vendor) (string, error) {
	ha, ok := v.(hostAddresser)
	if !ok {
		return "", usageErrorf("--router local: boxes on %s cannot reach this machine; pass --router URL", v.Name())
	}
	host, err := ha.HostAddress(ctx)
	if err != nil {
		return "", fmt.Errorf("local model endpoint: %w", err)
	}
	return host, nil
}

// startRouterFor starts the local model endpoint of the box with run tag
// tag, where the vendor's boxes reach it, until until. Its key goes
// through its environment, never its command line.
func startRouterFor(ctx context.Context, v vendors.Vendor, s *boxstate.Store, tag string, until time.Time) (*localrouter.Process, string, error) {
	host, err := localHost(ctx, v)
	if err != nil {
		return nil, "", err
	}
	key := localrouter.NewKey()
	p, err := startLocalRouter(ctx, host, key, until, filepath.Join(filepath.Dir(s.Path()), "routers", tag+".log"))
	return p, key, err
}

// startLocalRouter starts `boxctl router-stub` of this binary, detached,
// listening on host (any free port) with key, until until.
func startLocalRouter(ctx context.Context, host, key string, until time.Time, logPath string) (*localrouter.Process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	return localrouter.Start(ctx, localrouter.Options{
		Command: []string{exe, "router-stub", "--addr", net.JoinHostPort(host, "0"),
			"--until", strconv.FormatInt(until.Unix(), 10), "--reply", localReply},
		Env: []string{routerKeyEnv + "=" + key}, Until: until, Log: logPath})
}

// routerFromFlag finds the Router of a --router flag: none for "local"
// (the caller starts the local endpoint), else the flag's URL or
// $TANGLE_ROUTER_URL, with the key from $TANGLE_API_KEY. getenv reads the
// environment. What is missing or malformed is a usage error that says
// what to set.
func routerFromFlag(router string, getenv func(string) string) (url, key string, err error) {
	if router == routerLocal {
		return "", "", nil
	}
	r, err := sandbox.RouterFromEnv(router, getenv)
	var missing *sandbox.MissingRouterEnvError
	switch {
	case !errors.As(err, &missing):
	case router != "":
		return "", "", usageErrorf("no key for the Router: --router URL takes it from %s, which is not set; set it, "+
			"or pass --router local for a local model endpoint", routerKeyVar)
	case len(missing.Vars) == 2:
		return "", "", usageErrorf("no model Router: %s and %s are not set; set both, or pass --router local for a local model endpoint",
			routerURLEnv, routerKeyVar)
	default:
		return "", "", usageErrorf("no model Router: %s is not set; set it, or pass --router local for a local model endpoint", missing.Vars[0])
	}
	if err := sandbox.CheckRouterURL(r.URL); errors.Is(err, sandbox.ErrRouterURLCredentials) {
		return "", "", usageErrorf("Router URL %v: the key goes in $%s", err, routerKeyVar)
	} else if err != nil {
		return "", "", usageErrorf("Router URL %q: %v", r.URL, err)
	}
	return r.URL, r.Key, nil
}
