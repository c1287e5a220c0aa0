package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
)

// This file talks to a sandbox's envd (spec/envd/envd.yaml and the
// process service of process.proto): its files API and Connect calls.

// goneMessage is the message of the proxy's 502 for a sandbox it does not
// know (any more).
const goneMessage = "The sandbox was not found"

// hostURL returns the base URL of a port of the sandbox.
func (b *Box) hostURL(port int) string {
	return b.v.o.scheme + "://" + strconv.Itoa(port) + "-" + b.id + "." + b.domain
}

// envdRequest makes a request to envd with its headers: the access token
// of a secure sandbox and the user, when one is set (Basic "user:").
func (b *Box) envdRequest(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	u := b.hostURL(EnvdPort) + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if b.accessToken != "" {
		req.Header.Set("X-Access-Token", b.accessToken)
	}
	if b.v.o.user != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(b.v.o.user+":")))
	}
	return req, nil
}

// fileQuery is the query of /files: the path, and the user when one is set.
func (b *Box) fileQuery(path string) url.Values {
	q := url.Values{"path": {path}}
	if b.v.o.user != "" {
		q.Set("username", b.v.o.user)
	}
	return q
}

// envdDo sends an envd request; an answer that is not a success becomes
// an error by envdError, a failed connection one by gone.
func (b *Box) envdDo(op string, req *http.Request, want ...int) (*http.Response, error) {
	resp, err := b.v.http.Do(req)
	if err != nil {
		return nil, b.gone(req.Context(), op, err)
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, b.envdError(op, resp)
}

// envdError maps an envd (or proxy) answer that is not a success: the
// proxy's 502 for an unknown sandbox is a *vendors.GoneError (which
// matches vendors.ErrNotFound too); a Connect error body a *ConnectError;
// others an *APIError.
func (b *Box) envdError(op string, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	_ = json.Unmarshal(raw, &body)
	if resp.StatusCode == http.StatusBadGateway && body.Message == goneMessage {
		return &vendors.GoneError{Vendor: Name, ID: b.id, Op: op, Err: errors.New(goneMessage)}
	}
	var code string
	if json.Unmarshal(body.Code, &code) == nil && code != "" {
		return fmt.Errorf("e2b: %s: %w", op, &ConnectError{Procedure: resp.Request.URL.Path, Code: code, Message: body.Message})
	}
	e := &vendorhttp.APIError{Vendor: Name, Method: resp.Request.Method, Path: resp.Request.URL.Path,
		Status: resp.StatusCode, Message: body.Message}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(raw))
	}
	return fmt.Errorf("e2b: %s: %w", op, e)
}

// gone maps a failure during op in the sandbox: when the sandbox no longer
// exists (the control plane says so), a *vendors.GoneError naming why;
// otherwise err. The check has its own short deadline, so a cut stream
// turns into the typed error at once, not after a timeout.
func (b *Box) gone(ctx context.Context, op string, err error) error {
	var ge *vendors.GoneError
	if errors.As(err, &ge) {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*time.Second)
	defer cancel()
	if _, serr := b.v.getSandbox(cctx, b.id); isStatus(serr, http.StatusNotFound) {
		return &vendors.GoneError{Vendor: Name, ID: b.id, Op: op, Err: err}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("e2b: %s: %w", op, context.Cause(ctx))
	}
	return fmt.Errorf("e2b: %s: %w", op, err)
}

// unary calls a unary Connect procedure of envd ("/process.Process/SendSignal").
func (b *Box) unary(ctx context.Context, procedure string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := b.envdRequest(ctx, http.MethodPost, procedure, nil, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := b.envdDo(procedure, req, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return b.gone(ctx, procedure, fmt.Errorf("decode answer: %w", err))
	}
	return nil
}

// stream calls a server-streaming Connect procedure of envd
// ("/process.Process/Start"); the caller closes the reader.
func (b *Box) stream(ctx context.Context, procedure string, in any) (*streamReader, error) {
	msg, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := b.envdRequest(ctx, http.MethodPost, procedure, nil, bytes.NewReader(envelope(msg, 0)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	// Keepalives keep idle streams open through proxies.
	req.Header.Set("Keepalive-Ping-Interval", "30")
	resp, err := b.envdDo(procedure, req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return newStreamReader(procedure, resp.Body), nil
}

// readFile returns a file of the sandbox (GET /files).
func (b *Box) readFile(ctx context.Context, path string) ([]byte, error) {
	req, err := b.envdRequest(ctx, http.MethodGet, "/files", b.fileQuery(path), nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.envdDo("read "+path, req, http.StatusOK)
	if isStatus(err, http.StatusNotFound) {
		return nil, fmt.Errorf("e2b: read %s: %w", path, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReadBytes+1))
	if err != nil {
		return nil, b.gone(ctx, "read "+path, err)
	}
	if len(data) > maxReadBytes {
		return nil, fmt.Errorf("e2b: read %s: over %d bytes", path, maxReadBytes)
	}
	return data, nil
}

// writeFile creates or replaces a file of the sandbox, parents made
// (POST /files).
func (b *Box) writeFile(ctx context.Context, path string, data []byte) error {
	req, err := b.envdRequest(ctx, http.MethodPost, "/files", b.fileQuery(path), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := b.envdDo("write "+path, req, http.StatusOK)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// waitReady polls envd's /health until it answers 204, for at most
// timeout.
func (b *Box) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		req, err := b.envdRequest(ctx, http.MethodGet, "/health", nil, nil)
		if err != nil {
			return err
		}
		resp, err := b.v.http.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("envd health answered %s", resp.Status)
			if resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusNotFound {
				if gerr := b.gone(ctx, "create", last); errors.Is(gerr, vendors.ErrGone) {
					return gerr
				}
			}
		} else {
			last = err
		}
		if err := vendorhttp.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("e2b: sandbox %s: envd did not answer within %v: %w", b.id, timeout, errors.Join(last, err))
		}
	}
}
