package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// maxReadBytes caps a file Read returns.
const maxReadBytes = 256 << 20

// Box is one sandbox. It is safe for concurrent use.
type Box struct {
	procLayer // Spawn and Process

	v            *Vendor
	id           string
	domain       string
	accessToken  string // envd's X-Access-Token (secure sandboxes)
	trafficToken string // e2b-traffic-access-token for exposed ports

	mu       sync.Mutex
	labels   map[string]string // nil until known
	template string            // the sandbox's template, "" until known
}

var _ vendors.Box = (*Box)(nil)

func (v *Vendor) newBox(sb sandbox) *Box {
	b := (&Box{v: v, id: sb.SandboxID, domain: v.o.domain, accessToken: sb.EnvdAccessToken, template: sb.TemplateID}).withProcs()
	if sb.Domain != nil && *sb.Domain != "" {
		b.domain = *sb.Domain
	}
	if sb.TrafficAccessToken != nil {
		b.trafficToken = *sb.TrafficAccessToken
	}
	return b
}

func (b *Box) setDetail(d sandboxDetail) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.labels, b.template = d.Metadata, d.TemplateID
	if b.labels == nil {
		b.labels = map[string]string{}
	}
}

// ID returns the sandbox id.
func (b *Box) ID() string { return b.id }

// Status returns the sandbox's state and metadata.
func (b *Box) Status(ctx context.Context) (vendors.Info, error) {
	d, err := b.v.getSandbox(ctx, b.id)
	if err != nil {
		return vendors.Info{}, b.v.mapErr("status", b.id, err)
	}
	b.setDetail(d)
	return info(d), nil
}

// Destroy kills the sandbox; one already gone is not an error.
func (b *Box) Destroy(ctx context.Context) error {
	err := b.v.killSandbox(ctx, b.id)
	if err == nil || isStatus(err, http.StatusNotFound) {
		return nil
	}
	return b.v.mapErr("destroy", b.id, err)
}

// Endpoint returns the sandbox's URL of port, with the traffic token
// header when the sandbox's ports are not public. Only ports the box was
// created with (CreateSpec.Ports) are served. Requests through the
// endpoint's transport that fail because the sandbox is gone fail with a
// *vendors.GoneError.
func (b *Box) Endpoint(ctx context.Context, port int) (vendors.Endpoint, error) {
	labels, err := b.knownLabels(ctx)
	if err != nil {
		return vendors.Endpoint{}, err
	}
	ports, err := boxmeta.ParsePorts(labels[boxmeta.LabelPorts])
	if err != nil {
		return vendors.Endpoint{}, fmt.Errorf("e2b: endpoint: %w", err)
	}
	if !slices.Contains(ports, port) {
		return vendors.Endpoint{}, fmt.Errorf("e2b: box %s does not expose port %d", b.id, port)
	}
	ep := vendors.Endpoint{URL: b.hostURL(port), Transport: &goneTransport{b: b, rt: b.v.http.Transport}}
	if b.trafficToken != "" {
		ep.Header = http.Header{"E2b-Traffic-Access-Token": {b.trafficToken}}
	}
	return ep, nil
}

func (b *Box) knownLabels(ctx context.Context) (map[string]string, error) {
	b.mu.Lock()
	l := b.labels
	b.mu.Unlock()
	if l != nil {
		return l, nil
	}
	if _, err := b.Status(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.labels, nil
}

// Read returns a regular file of the sandbox.
func (b *Box) Read(ctx context.Context, p string) ([]byte, error) {
	if !path.IsAbs(p) {
		return nil, fmt.Errorf("e2b: read %q: want an absolute path", p)
	}
	return b.readFile(ctx, p)
}

// Write creates or replaces a regular file (parents made), owned by the
// sandbox's user, with mode.
func (b *Box) Write(ctx context.Context, p string, data []byte, mode uint32) error {
	if !path.IsAbs(p) || path.Clean(p) == "/" {
		return fmt.Errorf("e2b: write %q: want an absolute file path", p)
	}
	if err := b.writeFile(ctx, p, data); err != nil {
		return err
	}
	res, err := b.Exec(ctx, vendors.ExecSpec{Command: []string{"chmod", strconv.FormatUint(uint64(mode&0o7777), 8), p}})
	if err != nil {
		return fmt.Errorf("e2b: write %s: %w", p, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("e2b: write %s: chmod: %s", p, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// goneTransport turns a request to a gone sandbox into a
// *vendors.GoneError: the proxy's 502 for an unknown sandbox, a failed
// connection, or a body cut off, once the control plane confirms the
// sandbox is gone.
type goneTransport struct {
	b  *Box
	rt http.RoundTripper
}

func (g *goneTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := g.rt.RoundTrip(r)
	if err != nil {
		return nil, g.b.gone(r.Context(), "request "+r.URL.Path, err)
	}
	if resp.StatusCode == http.StatusBadGateway {
		// The proxy's: the sandbox is gone, or nothing listens on the
		// port (yet), as a refused connection would say.
		err := g.b.envdError("request "+r.URL.Path, resp)
		resp.Body.Close()
		return nil, err
	}
	resp.Body = &goneBody{ReadCloser: resp.Body, b: g.b, ctx: r.Context(), op: "request " + r.URL.Path}
	return resp, nil
}

// CloseIdleConnections reaches the wrapped transport.
func (g *goneTransport) CloseIdleConnections() {
	if c, ok := g.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// goneBody is a response body whose read failure, when the sandbox is
// gone, is a *vendors.GoneError.
type goneBody struct {
	io.ReadCloser
	b    *Box
	ctx  context.Context
	op   string
	once sync.Once
	err  error
}

func (g *goneBody) Read(p []byte) (int, error) {
	n, err := g.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, http.ErrBodyReadAfterClose) && g.ctx.Err() == nil {
		g.once.Do(func() { g.err = g.b.gone(g.ctx, g.op, err) })
		if errors.Is(g.err, vendors.ErrGone) {
			return n, g.err
		}
	}
	return n, err
}
