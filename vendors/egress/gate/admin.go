package gate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"

	"github.com/tangle-network/boxctl/internal/adminapi"

	"github.com/tangle-network/boxctl/vendors/egress"
	"github.com/tangle-network/boxctl/vendors/egress/firewall"
)

// Gates are the gates one process serves, one per bridge, for callers in
// other processes through Handler (the boxctl broker serves it on its
// admin socket). It is safe for concurrent use.
type Gates struct {
	// Defaults are the options of every gate but its bridge, gateway and
	// broker (resolver, dialer, logger).
	Defaults Options

	mu    sync.Mutex
	gates map[string]*Gate
}

// RelayName is the name in the gates' API of the gate without a bridge
// whose relay and resolver listen at addr (a Kubernetes cluster's
// boxes').
func RelayName(addr netip.Addr) string { return relayPrefix + addr.String() }

const relayPrefix = "relay-"

// name is o's gate's name: its bridge, or RelayName of its address.
func name(o Options) string {
	if o.Bridge == "" {
		return RelayName(o.Gateway)
	}
	return o.Bridge
}

// Ensure returns the gate of o.Bridge (or, without one, of o.Gateway's
// relay), starting it with o (and Defaults) if there is none.
func (gs *Gates) Ensure(ctx context.Context, o Options) (*Gate, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.gates[name(o)]; ok {
		if g.o.Gateway != o.Gateway || g.o.Broker != o.Broker {
			return nil, fmt.Errorf("gate: %s is held with gateway %v and broker %v", name(o), g.o.Gateway, g.o.Broker)
		}
		if o.Bridge == "" {
			return g, nil
		}
		// Someone removed its rules (firewall.Uninstall): start it again,
		// its boxes' policies with it.
		if ok, err := firewall.Installed(o.Bridge); err != nil || ok {
			return g, err
		}
		g.mu.RLock()
		policies := maps.Clone(g.policies)
		g.mu.RUnlock()
		_ = g.Close(ctx)
		delete(gs.gates, o.Bridge)
		defer func() {
			if g := gs.gates[o.Bridge]; g != nil {
				for a, p := range policies {
					_ = g.Set(ctx, a, p)
				}
			}
		}()
	}
	o.Resolver, o.Dialer, o.Logger = gs.Defaults.Resolver, gs.Defaults.Dialer, gs.Defaults.Logger
	g, err := Start(ctx, o)
	if err != nil {
		return nil, err
	}
	if gs.gates == nil {
		gs.gates = map[string]*Gate{}
	}
	gs.gates[name(o)] = g
	return g, nil
}

func (gs *Gates) get(bridge string) (*Gate, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.gates[bridge]
	return g, ok
}

// Close closes every gate (their rules stay: see Gate.Close).
func (gs *Gates) Close(ctx context.Context) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var errs []error
	for _, g := range gs.gates {
		errs = append(errs, g.Close(ctx))
	}
	gs.gates = nil
	return errors.Join(errs...)
}

// gateBody starts a gate over the API.
type gateBody struct {
	Gateway netip.Addr     `json:"gateway"`
	Broker  netip.AddrPort `json:"broker"`
}

// policyBody is a box's policy over the API, as egress.Policy renders it.
type policyBody struct {
	Policy string `json:"policy"`
}

// Handler serves the gates for their owner only (a unix socket of mode
// 0600): PUT /v1/gates/{bridge} ({"gateway","broker"}) starts one (a
// bridge named RelayName(gateway) is a relay without a bridge);
// PUT /v1/gates/{bridge}/boxes/{addr} ({"policy"}) sets a box's policy,
// holding when it answers; GET answers it; DELETE forgets the box. Errors
// are {"type","message"} with a 4xx status.
func (gs *Gates) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/gates/{bridge}", func(w http.ResponseWriter, r *http.Request) {
		var b gateBody
		if !adminapi.Decode(w, r, &b) {
			return
		}
		o := Options{Bridge: r.PathValue("bridge"), Gateway: b.Gateway, Broker: b.Broker}
		if a, ok := strings.CutPrefix(o.Bridge, relayPrefix); ok {
			// A relay without a bridge, named by its address.
			addr, err := netip.ParseAddr(a)
			if err != nil || addr != b.Gateway {
				adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_address", Message: "relay " + a + ": want the gateway's address in its name"})
				return
			}
			o.Bridge = ""
		}
		if _, err := gs.Ensure(r.Context(), o); err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "gate_failed", Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	box := func(w http.ResponseWriter, r *http.Request) (*Gate, netip.Addr, bool) {
		g, ok := gs.get(r.PathValue("bridge"))
		if !ok {
			adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: "no gate holds bridge " + r.PathValue("bridge")})
			return nil, netip.Addr{}, false
		}
		a, err := netip.ParseAddr(r.PathValue("addr"))
		if err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_address", Message: err.Error()})
			return nil, netip.Addr{}, false
		}
		return g, a, true
	}
	mux.HandleFunc("PUT /v1/gates/{bridge}/boxes/{addr}", func(w http.ResponseWriter, r *http.Request) {
		g, a, ok := box(w, r)
		if !ok {
			return
		}
		var b policyBody
		if !adminapi.Decode(w, r, &b) {
			return
		}
		p, err := egress.Parse(b.Policy)
		if err == nil {
			err = g.Set(r.Context(), a, p)
		}
		if err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_policy", Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/gates/{bridge}/boxes/{addr}", func(w http.ResponseWriter, r *http.Request) {
		g, a, ok := box(w, r)
		if !ok {
			return
		}
		p, ok := g.Policy(a)
		if !ok {
			adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: "no box at " + a.String()})
			return
		}
		adminapi.Write(w, http.StatusOK, policyBody{Policy: p.String()})
	})
	mux.HandleFunc("DELETE /v1/gates/{bridge}/boxes/{addr}", func(w http.ResponseWriter, r *http.Request) {
		g, a, ok := box(w, r)
		if !ok {
			return
		}
		if err := g.Remove(r.Context(), a); err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "remove_failed", Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// APIError is an answer of the gates' API that is not a success.
type APIError struct {
	Status        int
	Type, Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("gate: %s (%d): %s", e.Type, e.Status, e.Message)
}

// Client is the caller's side of the gates' API on a unix socket: the
// gate of one bridge in another process.
type Client struct {
	hc     *http.Client
	bridge string
}

// Dial returns a client of bridge's gate, served on the unix socket at
// path.
func Dial(path, bridge string) *Client {
	return &Client{hc: adminapi.UnixClient(path), bridge: bridge}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	err := adminapi.Call(ctx, c.hc, method, "http://gate/v1/gates/"+url.PathEscape(c.bridge)+path, in, out)
	var se *adminapi.StatusError
	if errors.As(err, &se) {
		return &APIError{Status: se.Status, Type: se.Body.Type, Message: se.Body.Message}
	}
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	return nil
}

// Start has the serving process hold the bridge with the gateway and the
// broker's address (a no-op when it does).
func (c *Client) Start(ctx context.Context, gateway netip.Addr, broker netip.AddrPort) error {
	return c.do(ctx, http.MethodPut, "", gateBody{Gateway: gateway, Broker: broker}, nil)
}

// Set gives the box at addr policy p; it holds when Set returns.
func (c *Client) Set(ctx context.Context, addr netip.Addr, p egress.Policy) error {
	return c.do(ctx, http.MethodPut, "/boxes/"+addr.String(), policyBody{Policy: p.String()}, nil)
}

// Policy returns the policy the gate holds for the box at addr.
func (c *Client) Policy(ctx context.Context, addr netip.Addr) (egress.Policy, error) {
	var b policyBody
	if err := c.do(ctx, http.MethodGet, "/boxes/"+addr.String(), nil, &b); err != nil {
		return egress.Policy{}, err
	}
	return egress.Parse(b.Policy)
}

// Remove forgets the box at addr.
func (c *Client) Remove(ctx context.Context, addr netip.Addr) error {
	return c.do(ctx, http.MethodDelete, "/boxes/"+addr.String(), nil, nil)
}
