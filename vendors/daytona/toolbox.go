package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// The toolbox is the daemon in every sandbox, reached through Daytona's
// proxy at {toolboxProxyUrl}/{sandboxId} with the API key.

// toolboxClient returns the box's toolbox client, asking the control
// plane for the proxy URL when the sandbox's description lacked it.
func (b *Box) toolboxClient(ctx context.Context) (*vendorhttp.Client, error) {
	b.mu.Lock()
	base, tbc := b.toolbox, b.tbc
	b.mu.Unlock()
	if tbc != nil {
		return tbc, nil
	}
	if base == "" {
		u, err := b.v.getToolboxProxyURL(ctx, b.id)
		if err != nil {
			return nil, typed("toolbox", b.id, err)
		}
		base = strings.TrimRight(u, "/") + "/" + b.id
	}
	tbc, err := b.v.client(base, decodeToolboxError)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.toolbox, b.tbc = base, tbc
	b.mu.Unlock()
	return tbc, nil
}

// call sends one short JSON call to the toolbox, each attempt bounded by
// WithCallTimeout. A failure is returned as it is, or as a
// *vendors.GoneError when the sandbox no longer runs.
func (b *Box) call(ctx context.Context, op string, c vendorhttp.Call) error {
	c.Timeout = b.v.opts.callTimeout
	return b.send(ctx, op, c)
}

// send sends one JSON call to the toolbox bounded by ctx only (a command
// that runs as long as it takes), failing as call does.
func (b *Box) send(ctx context.Context, op string, c vendorhttp.Call) error {
	tb, err := b.toolboxClient(ctx)
	if err != nil {
		return err
	}
	if _, err := tb.Do(ctx, c); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		}
		return b.lost(ctx, op, err)
	}
	return nil
}

// request sends a toolbox request whose body or answer is not JSON and
// returns the answer when its status is want; any other answer is an
// *vendorhttp.APIError (or a *vendors.GoneError). The caller closes the
// body.
func (b *Box) request(ctx context.Context, op, method, path string, q url.Values, body io.Reader, ctype string, want int) (*http.Response, error) {
	tb, err := b.toolboxClient(ctx)
	if err != nil {
		return nil, err
	}
	u := tb.BaseURL()
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range b.v.header {
		req.Header[k] = vs
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := tb.HTTPClient().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		}
		return nil, b.lost(ctx, op, fmt.Errorf("%s %s: %w", method, u.Path, err))
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		return nil, b.lost(ctx, op, tb.NewAPIError(resp))
	}
	return resp, nil
}

// decodeToolboxError reads the toolbox's error body {statusCode, message,
// code, timestamp, path, method}.
func decodeToolboxError(body []byte, e *vendorhttp.APIError) bool {
	var r struct {
		Message string `json:"message"`
		Code    string `json:"code"`
		Path    string `json:"path"`
	}
	if json.Unmarshal(body, &r) != nil || (r.Message == "" && r.Code == "") {
		return decodeError(body, e)
	}
	e.Message, e.Code = r.Message, r.Code
	if r.Path != "" {
		e.Path = r.Path
	}
	return true
}
