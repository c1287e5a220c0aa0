package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// localReply is what the local model endpoint of `up --router local`
// answers every model request with.
const localReply = "Hello from inside the box: the local model endpoint answered."

// localHost is where the vendor's boxes reach a server on this machine:
// the broker's address for them.
func localHost(ctx context.Context, v vendors.Vendor) (string, error) {
	host, err := localrouter.HostFor(ctx, v)
	if errors.Is(err, localrouter.ErrUnreachable) {
		return "", usageErrorf("the broker: %v; serve one the boxes reach (boxctl broker --listen, behind a tunnel) and pass --broker-url", err)
	}
	return host, err
}

// startRouterFor starts the local model endpoint of the box with run tag
// tag on loopback, where only the broker reaches it, until until.
func startRouterFor(ctx context.Context, s *boxstate.Store, tag string, until time.Time) (*localrouter.Process, string, error) {
	host := "127.0.0.1"
	exe, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("local model endpoint: %w", err)
	}
	return localrouter.StartStub(ctx, localrouter.StubOptions{Exe: exe, Host: host, KeyEnv: routerKeyEnv, Reply: localReply,
		Until: until, Log: filepath.Join(filepath.Dir(s.Path()), "routers", tag+".log")})
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
