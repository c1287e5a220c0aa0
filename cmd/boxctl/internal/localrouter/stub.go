package localrouter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// ErrUnreachable is the error of HostFor for a vendor whose boxes cannot
// reach a server on this machine.
var ErrUnreachable = errors.New("its boxes cannot reach this machine")

// HostAddresser is a vendor that knows where a server on this machine is
// reachable from its boxes (docker.Vendor.HostAddress).
type HostAddresser interface {
	HostAddress(ctx context.Context) (string, error)
}

// HostFor returns the address on which a local model endpoint is
// reachable from v's boxes; ErrUnreachable (wrapped, naming the vendor)
// when it is not, or the vendor was given no such address
// (vendors.ErrNoHostAddress).
func HostFor(ctx context.Context, v vendors.Vendor) (string, error) {
	ha, ok := v.(HostAddresser)
	if !ok {
		return "", fmt.Errorf("boxes on %s: %w", v.Name(), ErrUnreachable)
	}
	host, err := ha.HostAddress(ctx)
	if errors.Is(err, vendors.ErrNoHostAddress) {
		return "", fmt.Errorf("boxes on %s: %w (%w)", v.Name(), ErrUnreachable, err)
	}
	if err != nil {
		return "", fmt.Errorf("local model endpoint: %w", err)
	}
	return host, nil
}

// StubOptions say how StartStub runs the model stub.
type StubOptions struct {
	// Exe is the boxctl executable whose `router-stub` command serves;
	// required.
	Exe string
	// Host is where it listens (HostFor), on a free port.
	Host string
	// KeyEnv names the variable the key reaches the stub through (never
	// its command line).
	KeyEnv string
	// Reply is what it answers every model request with.
	Reply string
	// Until is when it ends by itself.
	Until time.Time
	// Log is its output file (Options.Log).
	Log string
}

// StartStub starts `boxctl router-stub`, detached, with a fresh key,
// which it returns with the process.
func StartStub(ctx context.Context, o StubOptions) (*Process, string, error) {
	key := NewKey()
	p, err := Start(ctx, Options{
		Command: []string{o.Exe, "router-stub", "--addr", net.JoinHostPort(o.Host, "0"),
			"--until", strconv.FormatInt(o.Until.Unix(), 10), "--reply", o.Reply},
		Env: []string{o.KeyEnv + "=" + key}, Until: o.Until, Log: o.Log})
	return p, key, err
}
