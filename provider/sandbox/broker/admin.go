package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/tangle-network/boxctl/internal/adminapi"
)

// Status is what GET /v1/status of the admin API answers.
type Status struct {
	Upstreams []string          `json:"upstreams"`
	Boxes     int               `json:"boxes"`
	Refusals  map[Refusal]int64 `json:"refusals"`
}

// Status reports the broker's upstreams, the boxes holding a token and the
// refusals by reason.
func (b *Broker) Status() Status {
	return Status{Upstreams: b.Upstreams(), Boxes: b.Live(), Refusals: b.Refusals()}
}

// upstreamBody is an upstream on the admin API, its key included.
type upstreamBody struct {
	Name      string `json:"name"`
	URL       string `json:"url"`
	Key       string `json:"key"`
	Auth      Auth   `json:"auth"`
	Transient bool   `json:"transient,omitempty"`
}

// ListenFunc serves the broker for boxes that reach this machine at host,
// once per host, and returns its base URL there.
type ListenFunc func(ctx context.Context, host string) (url string, err error)

// Admin returns the admin API of b, for its owner only (serve it on a unix
// socket of mode 0600): POST /v1/grants (a Grant; answers {"token"}),
// POST /v1/grants/{box}/bind ({"addr"}), DELETE /v1/grants/{box},
// GET /v1/usage/{box}, PUT /v1/upstreams/{name} ({"url","key","auth",
// "transient"}),
// POST /v1/listeners ({"host"}, answers {"url"}; through listen, nil for
// none), GET /v1/status and GET /metrics (Metrics). Bodies are JSON; errors are
// {"type","message"} with a 4xx status.
func (b *Broker) Admin(listen ListenFunc) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/upstreams/{name}", func(w http.ResponseWriter, r *http.Request) {
		var u upstreamBody
		if !adminapi.Decode(w, r, &u) {
			return
		}
		if err := b.SetUpstream(Upstream{Name: r.PathValue("name"), URL: u.URL, Key: u.Key, Auth: u.Auth, Transient: u.Transient}); err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_upstream", Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/listeners", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Host string `json:"host"`
		}
		if !adminapi.Decode(w, r, &body) {
			return
		}
		if listen == nil {
			adminapi.Write(w, http.StatusNotImplemented, adminapi.Error{Type: "not_implemented", Message: "this broker serves no more listeners"})
			return
		}
		u, err := listen(r.Context(), body.Host)
		if err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "listen_failed", Message: err.Error()})
			return
		}
		adminapi.Write(w, http.StatusOK, map[string]string{"url": u})
	})
	mux.HandleFunc("POST /v1/grants", func(w http.ResponseWriter, r *http.Request) {
		var g Grant
		if !adminapi.Decode(w, r, &g) {
			return
		}
		tok, err := b.Grant(r.Context(), g)
		if err != nil {
			adminapi.Write(w, http.StatusBadRequest, adminapi.Error{Type: "invalid_grant", Message: err.Error()})
			return
		}
		adminapi.Write(w, http.StatusOK, map[string]string{"token": tok})
	})
	mux.HandleFunc("POST /v1/grants/{box}/bind", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Addr netip.Addr `json:"addr"`
		}
		if !adminapi.Decode(w, r, &body) {
			return
		}
		if err := b.Bind(r.Context(), r.PathValue("box"), body.Addr); err != nil {
			adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /v1/grants/{box}", func(w http.ResponseWriter, r *http.Request) {
		_ = b.Revoke(r.Context(), r.PathValue("box"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/usage/{box}", func(w http.ResponseWriter, r *http.Request) {
		u, err := b.Usage(r.Context(), r.PathValue("box"))
		if err != nil {
			adminapi.Write(w, http.StatusNotFound, adminapi.Error{Type: "not_found", Message: err.Error()})
			return
		}
		adminapi.Write(w, http.StatusOK, u)
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) { adminapi.Write(w, http.StatusOK, b.Status()) })
	mux.Handle("GET /metrics", b.Metrics())
	b.replicaAdmin(mux)
	return mux
}

// Client is the caller's side of a broker's admin API: on a unix socket
// (Dial), or on TCP behind mutual TLS (DialTLS).
type Client struct {
	hc     *http.Client
	base   string
	remote bool
}

// Dial returns a client of the admin API on the unix socket at path.
func Dial(path string) *Client {
	return &Client{hc: adminapi.UnixClient(path), base: "http://broker"}
}

// DialTLS returns a client of the admin API at base (https://host:port)
// that presents conf's client certificate and trusts conf's RootCAs only,
// over TLS 1.3: a
// broker in another place (a Deployment in a cluster) whose admin API
// takes only the clients of its certificate authority. Anything but an
// https URL with a host, or a conf without a client certificate, is
// refused.
func DialTLS(base string, conf *tls.Config) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("broker: admin URL %q: want https://host:port", base)
	}
	if conf == nil || (len(conf.Certificates) == 0 && conf.GetClientCertificate == nil) {
		return nil, errors.New("broker: an admin API over TCP takes a client certificate")
	}
	if conf.RootCAs == nil || conf.InsecureSkipVerify {
		// Upstream keys go over this client: only the broker's own
		// authority may vouch for the server.
		return nil, errors.New("broker: an admin API over TCP is trusted by its own certificate authority only (RootCAs)")
	}
	tc := conf.Clone()
	tc.MinVersion = tls.VersionTLS13
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4,
		TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second}
	return &Client{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, base: "https://" + u.Host, remote: true}, nil
}

// Remote reports whether c reaches a broker over TCP (DialTLS): one that
// serves boxes at a URL of its own (Listen answers it whatever the host).
func (c *Client) Remote() bool { return c.remote }

// Close closes c's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

var _ Granter = (*Client)(nil)

// APIError is an answer of the admin API that is not a success.
type APIError struct {
	Status  int
	Type    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("broker: %s (%d): %s", e.Type, e.Status, e.Message)
}

// Is matches ErrUnknownBox for a not_found answer.
func (e *APIError) Is(target error) bool { return target == ErrUnknownBox && e.Type == "not_found" }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	err := adminapi.Call(ctx, c.hc, method, c.base+path, in, out)
	var se *adminapi.StatusError
	if errors.As(err, &se) {
		return &APIError{Status: se.Status, Type: se.Body.Type, Message: se.Body.Message}
	}
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}

// Grant issues g.Box's token. A broker of an earlier version, which
// knows no Source in a grant, gets the grant and then a Bind.
func (c *Client) Grant(ctx context.Context, g Grant) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/grants", g, &out)
	if ae := (*APIError)(nil); errors.As(err, &ae) && ae.Type == "invalid_body" && g.Source.IsValid() {
		src := g.Source
		g.Source = netip.Addr{}
		if err = c.do(ctx, http.MethodPost, "/v1/grants", g, &out); err == nil {
			if err = c.Bind(ctx, g.Box, src); err != nil {
				return "", errors.Join(err, c.Revoke(context.WithoutCancel(ctx), g.Box))
			}
		}
	}
	if err != nil {
		return "", err
	}
	if out.Token == "" {
		return "", errors.New("broker: the grant answered no token")
	}
	return out.Token, nil
}

// Bind ties box's token to addr.
func (c *Client) Bind(ctx context.Context, box string, addr netip.Addr) error {
	return c.do(ctx, http.MethodPost, "/v1/grants/"+url.PathEscape(box)+"/bind", map[string]netip.Addr{"addr": addr}, nil)
}

// Revoke retires box's token.
func (c *Client) Revoke(ctx context.Context, box string) error {
	return c.do(ctx, http.MethodDelete, "/v1/grants/"+url.PathEscape(box), nil, nil)
}

// Usage is what box spent.
func (c *Client) Usage(ctx context.Context, box string) (Usage, error) {
	var u Usage
	err := c.do(ctx, http.MethodGet, "/v1/usage/"+url.PathEscape(box), nil, &u)
	return u, err
}

// Status is the broker's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
	return s, err
}

// SetUpstream adds or replaces the upstream u.
func (c *Client) SetUpstream(ctx context.Context, u Upstream) error {
	return c.do(ctx, http.MethodPut, "/v1/upstreams/"+url.PathEscape(u.Name), upstreamBody{URL: u.URL, Key: u.Key, Auth: u.Auth,
		Transient: u.Transient}, nil)
}

// Listen has the broker serve boxes that reach this machine at host, and
// returns its URL there.
func (c *Client) Listen(ctx context.Context, host string) (string, error) {
	var out struct {
		URL string `json:"url"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/listeners", map[string]string{"host": host}, &out)
	return out.URL, err
}
