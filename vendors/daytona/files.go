package daytona

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// maxReadBytes caps a file Read returns.
const maxReadBytes = 256 << 20

// Read downloads a regular file (GET /files/download). A missing file is
// fs.ErrNotExist; a directory is an error.
func (b *Box) Read(ctx context.Context, p string) ([]byte, error) {
	resp, err := b.request(ctx, "read", http.MethodGet, "/files/download", url.Values{"path": {p}}, nil, "", http.StatusOK)
	if err != nil {
		if status(err) == http.StatusNotFound {
			return nil, fmt.Errorf("daytona: read %s: %w", p, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("daytona: read %s: %w", p, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("daytona: read %s: %w", p, b.lost(ctx, "read", err))
	}
	if len(data) > maxReadBytes {
		return nil, fmt.Errorf("daytona: read %s: over the %d byte limit", p, maxReadBytes)
	}
	return data, nil
}

// Write uploads the file (POST /files/upload-v2, the data as the raw
// request body; the toolbox makes its parents and replaces a file that is
// there), then sets its mode (POST /files/permissions). The file belongs
// to the user the toolbox runs as: the user of every process in the box.
func (b *Box) Write(ctx context.Context, p string, data []byte, mode uint32) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return fmt.Errorf("daytona: write %q: want a clean absolute file path", p)
	}
	if mode&0o7777 == 0 {
		mode = 0o644
	}
	resp, err := b.request(ctx, "write", http.MethodPost, "/files/upload-v2", url.Values{"path": {p}}, bytes.NewReader(data),
		"application/octet-stream", http.StatusOK)
	if err != nil {
		return fmt.Errorf("daytona: write %s: %w", p, err)
	}
	resp.Body.Close()
	q := url.Values{"path": {p}, "mode": {strconv.FormatUint(uint64(mode&0o7777), 8)}}
	if err := b.call(ctx, "write", vendorhttp.Call{Method: http.MethodPost, Path: "/files/permissions", Query: q, Idempotent: true}); err != nil {
		return fmt.Errorf("daytona: write %s: set mode: %w", p, err)
	}
	return nil
}
