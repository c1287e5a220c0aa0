package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/vendors"
)

// checkModel refuses a create or resume that no model endpoint would
// serve: without a Broker, the Router must be complete.
func (p *Provider) checkModel() error {
	if p.o.Broker != nil {
		return nil
	}
	return p.o.Router.check()
}

// modelAccess returns the model endpoint and key box's harnesses use: the
// broker's URL and a token of the box's own (rotating any earlier one,
// bound to the box's address where its vendor tells it), or without a
// Broker the Router itself.
func (p *Provider) modelAccess(ctx context.Context, box vendors.Box) (url, key string, err error) {
	if p.o.Broker == nil {
		return p.o.Router.URL, p.o.Router.Key, nil
	}
	token, err := p.o.Broker.Grant(ctx, broker.Grant{Box: box.ID(), Upstream: p.o.Upstream, Budget: p.o.Budget})
	if err != nil {
		return "", "", fmt.Errorf("broker grant: %w", err)
	}
	if a, ok := box.(vendors.Addressed); ok {
		addr, err := a.Address(ctx)
		if err == nil {
			err = p.o.Broker.Bind(ctx, box.ID(), addr)
		}
		if err != nil {
			return "", "", errors.Join(fmt.Errorf("broker bind: %w", err), p.o.Broker.Revoke(context.WithoutCancel(ctx), box.ID()))
		}
	}
	return p.o.BrokerURL, token, nil
}

// revokeModel retires box's token, if the provider has a broker.
func (p *Provider) revokeModel(ctx context.Context, boxID string) {
	if p.o.Broker == nil {
		return
	}
	if err := p.o.Broker.Revoke(ctx, boxID); err != nil {
		p.o.Logger.Warn("broker: revoke failed", "box", boxID, "err", err)
	}
}
