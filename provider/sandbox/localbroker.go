package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
)

// hostAddresser is a vendor that knows this machine's address as its
// boxes reach it (every vendor here has one).
type hostAddresser interface {
	HostAddress(ctx context.Context) (string, error)
}

// LocalBroker is a credential broker served in this process where a
// vendor's boxes reach this machine. Pass it as Options.Broker with its
// URL as Options.BrokerURL; Close it after the provider's boxes are gone.
type LocalBroker struct {
	*broker.Broker
	// URL is the broker's base URL as the boxes reach it.
	URL string
	srv *http.Server
}

// StartBroker serves a broker of o's upstreams on v's host address (the
// address on the boxes' network where they reach this machine, and from
// nowhere else), on a free port, until Close.
func StartBroker(ctx context.Context, v vendors.Vendor, o broker.Options) (*LocalBroker, error) {
	ha, ok := v.(hostAddresser)
	if !ok {
		return nil, fmt.Errorf("broker: vendor %s does not say where its boxes reach this machine: serve a broker where they do and pass its URL", v.Name())
	}
	host, err := ha.HostAddress(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b, err := broker.New(o)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("broker: listen where the boxes reach this machine: %w", err)
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &LocalBroker{Broker: b, URL: "http://" + l.Addr().String(), srv: srv}, nil
}

// Close stops serving; streams under way end.
func (l *LocalBroker) Close() error {
	if err := l.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
