package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

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

// modelAccess returns the model endpoint and key box's harnesses use (addr,
// when valid, is the box's address, known already): the
// broker's URL and a token of the box's own valid until until (rotating
// any earlier one, bound to the box's address where its vendor tells it),
// or without a Broker the Router itself.
func (p *Provider) modelAccess(ctx context.Context, box vendors.Box, addr netip.Addr, until time.Time) (url, key string, err error) {
	if p.o.Broker == nil {
		return p.o.Router.URL, p.o.Router.Key, nil
	}
	// A box with an address on this machine's network gets a token bound
	// to it in the same call.
	a, ok := box.(vendors.Addressed)
	switch {
	case !ok:
		addr = netip.Addr{}
	case !addr.IsValid():
		if addr, err = a.Address(ctx); err != nil {
			// No token for the box: any earlier one is retired, as a
			// grant would have rotated it.
			return "", "", errors.Join(fmt.Errorf("broker bind: %w", err), p.o.Broker.Revoke(context.WithoutCancel(ctx), box.ID()))
		}
	}
	token, err := p.o.Broker.Grant(ctx, broker.Grant{Box: box.ID(), Upstream: p.o.Upstream, Budget: p.o.Budget, Until: until, Source: addr})
	if err != nil {
		return "", "", fmt.Errorf("broker grant: %w", err)
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

// tokenMargin is how long a box token outlives its box's deadline: clocks
// of the box's vendor and of this machine differ.
const tokenMargin = time.Minute

// tokenUntil is when the token of a box that starts now for life, then
// kept retention suspended, ends at the latest.
func tokenUntil(life, retention time.Duration) time.Time {
	return time.Now().Add(life + retention + tokenMargin)
}

// boxUsage is what the broker measured box spend so far; ok is false
// without a broker, or when it does not answer.
func (p *Provider) boxUsage(ctx context.Context, boxID string) (broker.Usage, bool) {
	if p.o.Broker == nil {
		return broker.Usage{}, false
	}
	u, err := p.o.Broker.Usage(ctx, boxID)
	return u, err == nil
}

// usageSince is what was spent between two readings of a box's usage.
func usageSince(before, after broker.Usage) *broker.Usage {
	d := &broker.Usage{Requests: after.Requests - before.Requests, InputTokens: after.InputTokens - before.InputTokens,
		OutputTokens: after.OutputTokens - before.OutputTokens, Refused: after.Refused - before.Refused}
	for m, n := range after.Models {
		if n -= before.Models[m]; n > 0 {
			if d.Models == nil {
				d.Models = map[string]int64{}
			}
			d.Models[m] = n
		}
	}
	return d
}

// defaultModel is the model of a turn that names none, for a harness
// without a default of its own (Pi and opencode need provider/model),
// served by the broker's upstream named upstream: OpenAI's model when
// the upstream is OpenAI's, Anthropic's otherwise (the Router and the
// local endpoint serve both). "" leaves the choice to the harness, and
// to a Gemini upstream, whose API neither speaks: the turn must name a
// model.
func defaultModel(harness, upstream string) string {
	if harness != "pi" && harness != "opencode" {
		return ""
	}
	kind, _, _ := strings.Cut(upstream, "-")
	switch kind {
	case broker.OpenAI:
		return "openai/gpt-5.5"
	case broker.Gemini:
		return ""
	}
	return "anthropic/claude-sonnet-4-5"
}
