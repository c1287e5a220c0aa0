package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/modelapi"
	"github.com/tangle-network/boxctl/provider/sandbox/replica"
)

// Grant is what a box may spend through the broker.
type Grant struct {
	// Box is the box's id. Required.
	Box string `json:"box"`
	// Upstream names the upstream of the box's requests ("" for the
	// broker's default: its first).
	Upstream string `json:"upstream,omitempty"`
	// Budget bounds what the box spends (zero: no bound).
	Budget Budget `json:"budget,omitzero"`
	// Until is when the token ends by itself, at the latest (zero:
	// never): the box's last possible moment.
	Until time.Time `json:"until,omitzero"`
	// Source, when valid, binds the token to the box's address at once,
	// as Bind does: one call where a box's address is known.
	Source netip.Addr `json:"source,omitzero"`
}

// Budget bounds a box's spending; a zero field bounds nothing.
type Budget struct {
	// Tokens bounds input and output tokens together.
	Tokens int64 `json:"tokens,omitempty"`
	// Requests bounds the model requests.
	Requests int64 `json:"requests,omitempty"`
}

// Usage is what a box spent, as the upstream's answers said.
type Usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	// Models counts the answered requests by the model the upstream said
	// served them.
	Models map[string]int64 `json:"models,omitempty"`
	// Refused counts the box's requests the broker refused.
	Refused int64 `json:"refused,omitempty"`
}

// Granter issues and retires box tokens: a Broker in this process, or a
// Client of one in another.
type Granter interface {
	// Grant issues the box's token, rotating any earlier one (and binding
	// it to g.Source when that is valid).
	Grant(ctx context.Context, g Grant) (token string, err error)
	// Bind ties the box's token to the address its requests come from.
	Bind(ctx context.Context, box string, addr netip.Addr) error
	// Revoke retires the box's token; revoking an unknown box is not an
	// error.
	Revoke(ctx context.Context, box string) error
	// Usage is what the box spent so far (kept after Revoke).
	Usage(ctx context.Context, box string) (Usage, error)
}

// Refusal is why the broker refused a request: the value of its
// X-Boxctl-Broker-Refusal header.
type Refusal string

// Refusals.
const (
	RefusedNoToken  Refusal = "no_token"
	RefusedUnknown  Refusal = "unknown_token"
	RefusedRevoked  Refusal = "revoked_token"
	RefusedExpired  Refusal = "expired_token"
	RefusedRotated  Refusal = "rotated_token"
	RefusedSource   Refusal = "wrong_source"
	RefusedRoute    Refusal = "route_not_allowed"
	RefusedBudget   Refusal = "budget_spent"
	RefusedUpstream Refusal = "upstream_unknown"
)

// DefaultMaxRequestBytes bounds a model request's body by default (a long
// conversation with images fits).
const DefaultMaxRequestBytes = 64 << 20

// RefusalHeader carries a refused request's Refusal.
const RefusalHeader = "X-Boxctl-Broker-Refusal"

// ErrUnknownBox is Bind of a box without a grant.
var ErrUnknownBox = errors.New("broker: no grant for the box")

// Options configure a Broker.
type Options struct {
	// Upstreams are where requests go; the first is the default. Names
	// are unique; SetUpstream adds more.
	Upstreams []Upstream
	// Logger receives refusals and upstream failures, never a secret.
	// Default: discard.
	Logger *slog.Logger
	// Transport carries the upstream requests. Default: a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	// MaxRetired bounds the retired tokens remembered to say why they are
	// refused (default 65536); older ones are refused as unknown.
	MaxRetired int
	// MaxRequestBytes bounds a request's body: a larger one is answered
	// 413. Default: DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// Replica keeps the boxes' events outside them: their bridges ship
	// them to wire.ReplicaPath with their tokens (nil: none kept, the
	// route answers 404 and the bridges stop shipping).
	Replica *replica.Store
}

type digest [sha256.Size]byte

type grant struct {
	Grant
	digest digest
	source netip.Addr
}

type retired struct {
	why Refusal
	box string
}

// Broker is the credential broker. It is safe for concurrent use.
type Broker struct {
	o     Options
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	up       map[string]Upstream
	upOrder  []string
	byDigest map[digest]*grant
	byBox    map[string]*grant
	retired  map[digest]retired
	order    []digest // retired, oldest first
	usage    map[string]*Usage
	refusals map[Refusal]int64
}

// New returns a Broker of o's upstreams.
func New(o Options) (*Broker, error) {
	b := &Broker{o: o, up: map[string]Upstream{}, byDigest: map[digest]*grant{}, byBox: map[string]*grant{},
		retired: map[digest]retired{}, usage: map[string]*Usage{}, refusals: map[Refusal]int64{}}
	for _, u := range o.Upstreams {
		if _, dup := b.up[u.Name]; dup {
			return nil, fmt.Errorf("broker: upstream %s named twice", u.Name)
		}
		if err := b.SetUpstream(u); err != nil {
			return nil, err
		}
	}
	if b.o.Logger == nil {
		b.o.Logger = slog.New(slog.DiscardHandler)
	}
	if b.o.MaxRequestBytes <= 0 {
		b.o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if b.o.MaxRetired <= 0 {
		b.o.MaxRetired = 1 << 16
	}
	if b.o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		b.o.Transport = t
	}
	b.proxy = &httputil.ReverseProxy{Rewrite: b.rewrite, Transport: b.o.Transport, FlushInterval: -1,
		ModifyResponse: b.meter, ErrorHandler: b.upstreamFailed, BufferPool: copyBuffers{}}
	return b, nil
}

// SetUpstream adds u, or replaces the upstream of its name (grants of it
// use the new one from their next request). The first one set is the
// default.
func (b *Broker) SetUpstream(u Upstream) error {
	if err := u.check(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.up[u.Name]; !ok {
		b.upOrder = append(b.upOrder, u.Name)
	}
	b.up[u.Name] = u
	return nil
}

// Upstreams returns the names of the broker's upstreams, the default
// first.
func (b *Broker) Upstreams() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.upOrder)
}

func newToken() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	return "bxt_" + base64.RawURLEncoding.EncodeToString(raw[:])
}

// Grant issues g.Box's token; an earlier token of the box is refused as
// rotated from then on, and the box's binding is kept unless g.Source
// replaces it.
func (b *Broker) Grant(_ context.Context, g Grant) (string, error) {
	if g.Box == "" {
		return "", errors.New("broker: a grant needs a box")
	}
	if g.Budget.Tokens < 0 || g.Budget.Requests < 0 {
		return "", errors.New("broker: a budget must not be negative")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if g.Upstream == "" && len(b.upOrder) > 0 {
		g.Upstream = b.upOrder[0]
	}
	if _, ok := b.up[g.Upstream]; !ok {
		return "", fmt.Errorf("broker: grant of box %s: unknown upstream %q (have %s)", g.Box, g.Upstream, strings.Join(b.upOrder, ", "))
	}
	token := newToken()
	ng := &grant{Grant: g, digest: sha256.Sum256([]byte(token))}
	ng.Source = netip.Addr{} // the binding checked is ng.source
	if old := b.byBox[g.Box]; old != nil {
		ng.source = old.source
		b.retireLocked(old, RefusedRotated)
	}
	if g.Source.IsValid() {
		ng.source = g.Source.Unmap()
	}
	b.byBox[g.Box], b.byDigest[ng.digest] = ng, ng
	if b.usage[g.Box] == nil {
		b.usage[g.Box] = &Usage{}
	}
	return token, nil
}

// Bind ties box's token to addr: a request from any other address is
// refused (RefusedSource).
func (b *Broker) Bind(_ context.Context, box string, addr netip.Addr) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.byBox[box]
	if g == nil {
		return fmt.Errorf("%w %s", ErrUnknownBox, box)
	}
	g.source = addr.Unmap()
	return nil
}

// Revoke retires box's token.
func (b *Broker) Revoke(_ context.Context, box string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.byBox[box]; g != nil {
		b.retireLocked(g, RefusedRevoked)
		delete(b.byBox, box)
		b.pruneLocked(g.Upstream)
	}
	return nil
}

// pruneLocked removes upstream name when it is Transient and no grant
// uses it any more.
func (b *Broker) pruneLocked(name string) {
	if u, ok := b.up[name]; !ok || !u.Transient {
		return
	}
	for _, g := range b.byBox {
		if g.Upstream == name {
			return
		}
	}
	delete(b.up, name)
	b.upOrder = slices.DeleteFunc(b.upOrder, func(n string) bool { return n == name })
}

func (b *Broker) retireLocked(g *grant, why Refusal) {
	delete(b.byDigest, g.digest)
	b.retired[g.digest] = retired{why: why, box: g.Box}
	b.order = append(b.order, g.digest)
	for len(b.order) > b.o.MaxRetired {
		delete(b.retired, b.order[0])
		b.order = b.order[1:]
	}
}

// Usage is what box spent so far.
func (b *Broker) Usage(_ context.Context, box string) (Usage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.usage[box]
	if u == nil {
		return Usage{}, fmt.Errorf("%w %s", ErrUnknownBox, box)
	}
	out := *u
	out.Models = maps.Clone(u.Models)
	return out, nil
}

// Refusals counts the refused requests by reason.
func (b *Broker) Refusals() map[Refusal]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.refusals)
}

var _ Granter = (*Broker)(nil)

// ServeHTTP serves the boxes' model requests.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, wire.ReplicaPath) {
		b.serveReplica(w, r)
		return
	}
	family, _ := modelapi.Route(r.Method, r.URL.Path)
	kind, token := modelapi.PresentedKey(r)
	g, why := b.admit(r, family, token)
	if why != "" {
		b.refuse(w, r, family, kind, why)
		return
	}
	// The request is read whole before it is forwarded: a model request
	// is bounded, and net/http's server closes an inbound body once the
	// answer starts, while the transport may read the body once more
	// after its declared length (to see that it ends), which then fails
	// and cuts the upstream's answer short.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.o.MaxRequestBytes))
	if err != nil {
		status, msg := http.StatusBadRequest, "the request body could not be read"
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", b.o.MaxRequestBytes)
		}
		writeError(w, family, kind, status, "", msg)
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	b.mu.Lock()
	up := b.up[g.Upstream]
	b.mu.Unlock()
	ctx := context.WithValue(r.Context(), routeKey{}, route{grant: g, up: up, kind: kind, family: family})
	b.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// admit finds the request's grant, or why it is refused.
func (b *Broker) admit(r *http.Request, family modelapi.Family, token string) (*grant, Refusal) {
	if token == "" {
		return nil, b.count(nil, RefusedNoToken)
	}
	d := digest(sha256.Sum256([]byte(token)))
	b.mu.Lock()
	defer b.mu.Unlock()
	g, why := b.grantLocked(r, d, family == modelapi.FamilyNone)
	if why != "" {
		return nil, why
	}
	u := b.usage[g.Box]
	if bu := g.Budget; (bu.Requests > 0 && u.Requests >= bu.Requests) || (bu.Tokens > 0 && u.InputTokens+u.OutputTokens >= bu.Tokens) {
		return nil, b.countLocked(u, RefusedBudget)
	}
	u.Requests++
	return g, ""
}

// grantOf finds the live grant of token, from the address it is bound to,
// for a route that is not a model API's (the replica's).
func (b *Broker) grantOf(r *http.Request, token string) (*grant, Refusal) {
	if token == "" {
		return nil, b.count(nil, RefusedNoToken)
	}
	d := digest(sha256.Sum256([]byte(token)))
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.grantLocked(r, d, false)
}

// grantLocked finds the live grant of the token of digest d presented by
// r: known, not past its end, from the address it is bound to; noRoute
// refuses it for the route.
func (b *Broker) grantLocked(r *http.Request, d digest, noRoute bool) (*grant, Refusal) {
	g := b.byDigest[d]
	if g == nil {
		if old, ok := b.retired[d]; ok {
			return nil, b.countLocked(b.usage[old.box], old.why)
		}
		return nil, b.countLocked(nil, RefusedUnknown)
	}
	u := b.usage[g.Box]
	if !g.Until.IsZero() && time.Now().After(g.Until) {
		b.retireLocked(g, RefusedExpired)
		delete(b.byBox, g.Box)
		return nil, b.countLocked(u, RefusedExpired)
	}
	if noRoute {
		return nil, b.countLocked(u, RefusedRoute)
	}
	if g.source.IsValid() {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || ap.Addr().Unmap() != g.source {
			return nil, b.countLocked(u, RefusedSource)
		}
	}
	return g, ""
}

func (b *Broker) count(u *Usage, why Refusal) Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.countLocked(u, why)
}

func (b *Broker) countLocked(u *Usage, why Refusal) Refusal {
	b.refusals[why]++
	if u != nil {
		u.Refused++
	}
	return why
}

type routeKey struct{}

type route struct {
	grant  *grant
	up     Upstream
	kind   modelapi.AuthKind
	family modelapi.Family
}

// rewrite points the request at its upstream, with the upstream's
// credential in place of the box's token.
func (b *Broker) rewrite(pr *httputil.ProxyRequest) {
	rt := pr.In.Context().Value(routeKey{}).(route)
	base, _ := url.Parse(rt.up.URL) // checked by New
	out := pr.Out
	out.URL.Scheme, out.URL.Host = base.Scheme, base.Host
	out.URL.Path = strings.TrimSuffix(base.Path, "/") + pr.In.URL.Path
	out.URL.RawPath = ""
	kind := rt.kind
	switch rt.up.Auth {
	case AuthBearer:
		kind = modelapi.AuthBearer
	case AuthAPIKey:
		kind = modelapi.AuthAPIKey
	case AuthGoogAPIKey:
		kind = modelapi.AuthGoogAPIKey
	}
	modelapi.ReplaceKey(out, kind, rt.up.Key)
	out.Host = base.Host
	// The box's address is its own business; the upstream sees the
	// broker's.
	out.Header.Del("X-Forwarded-For")
	out.Header.Del("Forwarded")
}

// upstreamFailed answers a request the upstream did not answer, without
// its error (which may name the upstream's address).
func (b *Broker) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	rt := r.Context().Value(routeKey{}).(route)
	if r.Context().Err() == nil {
		b.o.Logger.Warn("broker: upstream failed", "upstream", rt.up.Name, "box", rt.grant.Box, "err", redact(err, rt.up.Key))
	}
	writeError(w, rt.family, rt.kind, http.StatusBadGateway, "", "the model upstream did not answer")
}

// redact removes key from err's text.
func redact(err error, key string) string {
	s := err.Error()
	if key != "" {
		s = strings.ReplaceAll(s, key, "[key]")
	}
	return s
}

func (b *Broker) refuse(w http.ResponseWriter, r *http.Request, family modelapi.Family, kind modelapi.AuthKind, why Refusal) {
	status, msg := http.StatusUnauthorized, "the box token is not valid here"
	switch why {
	case RefusedNoToken:
		msg = "no box token presented"
	case RefusedExpired:
		msg = "the box token's box has ended"
	case RefusedRoute:
		status, msg = http.StatusForbidden, "the box token opens the model APIs only"
	case RefusedSource:
		status, msg = http.StatusForbidden, "the box token belongs to another box"
	case RefusedBudget:
		status, msg = http.StatusTooManyRequests, "the box's budget is spent"
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	b.o.Logger.Info("broker: refused", "reason", string(why), "from", host, "method", r.Method, "path", r.URL.Path)
	w.Header().Set(RefusalHeader, string(why))
	writeError(w, family, kind, status, why, msg)
}

// Live counts the grants whose tokens are valid now (expired ones are
// retired on the way).
func (b *Broker) Live() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for box, g := range b.byBox {
		if !g.Until.IsZero() && now.After(g.Until) {
			b.retireLocked(g, RefusedExpired)
			delete(b.byBox, box)
		}
	}
	return len(b.byBox)
}

// copyBuffers lends the proxy its copy buffers, so that a stream does not
// allocate one of its own.
type copyBuffers struct{}

var copyPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (copyBuffers) Get() []byte  { return copyPool.Get().(*[32 << 10]byte)[:] }
func (copyBuffers) Put(b []byte) { copyPool.Put((*[32 << 10]byte)(b)) }
