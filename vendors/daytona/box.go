package daytona

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Box is one Daytona sandbox. It is safe for concurrent use.
type Box struct {
	v        *Vendor
	id       string
	ports    []int
	deadline time.Time
	public   bool
	forkSnap string // the snapshot Fork made this fork of (fork.go); "" for another box
	forkOf   string // the box it is a fork of

	mu      sync.Mutex
	toolbox string             // {toolboxProxyUrl}/{id}; empty until known
	tbc     *vendorhttp.Client // the toolbox's client, made from toolbox
	watch   *watcher
}

var _ vendors.Box = (*Box)(nil)

func (v *Vendor) newBox(sb sandbox) *Box {
	b := &Box{v: v, id: sb.ID, public: sb.Public}
	b.ports, _ = boxmeta.ParsePorts(sb.Labels[boxmeta.LabelPorts]) // a bad label exposes no port
	if d, err := boxmeta.ParseDeadline(sb.Labels[boxmeta.LabelDeadline]); err == nil {
		b.deadline = d
	}
	if sb.ToolboxProxyURL != "" {
		b.toolbox = strings.TrimRight(sb.ToolboxProxyURL, "/") + "/" + sb.ID
	}
	if sb.Labels[boxmeta.LabelForkOf] != "" && strings.HasPrefix(sb.Snapshot, forkSnapshotPrefix) {
		b.forkSnap, b.forkOf = sb.Snapshot, sb.Labels[boxmeta.LabelForkOf]
	}
	return b
}

// ID returns the sandbox id.
func (b *Box) ID() string { return b.id }

// waitStarted polls the sandbox (sb is its last known description) until
// it is started, under opts.createTimeout and ctx. A failed state ends the
// wait with a *CreateError carrying the sandbox's reason; running out of
// time names the state the sandbox was stuck in.
func (b *Box) waitStarted(ctx context.Context, sb sandbox) error {
	ctx, cancel := context.WithTimeoutCause(ctx, b.v.opts.createTimeout,
		fmt.Errorf("daytona: sandbox not started within %v", b.v.opts.createTimeout))
	defer cancel()
	tick := time.NewTicker(b.v.opts.poll)
	defer tick.Stop()
	for {
		switch {
		case sb.deleted():
			return &vendors.GoneError{Vendor: Name, ID: b.id, Op: "create", Err: errors.New("the sandbox was deleted while it started")}
		case sb.State == StateStarted:
			b.setToolbox(sb)
			return nil
		case sb.State == StateError || sb.State == StateBuildFailed:
			return &CreateError{ID: b.id, State: sb.State, Reason: sb.ErrorReason}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("daytona: sandbox %s still %s: %w", b.id, sb.State, context.Cause(ctx))
		case <-tick.C:
		}
		next, err := b.v.getSandbox(ctx, b.id)
		switch {
		case err == nil:
			sb = next
		case status(err) == http.StatusNotFound:
			return &vendors.GoneError{Vendor: Name, ID: b.id, Op: "create", Err: err}
		case ctx.Err() != nil:
			return fmt.Errorf("daytona: sandbox %s still %s: %w", b.id, sb.State, context.Cause(ctx))
		case !temporary(err):
			return fmt.Errorf("daytona: sandbox %s: %w", b.id, typed("create", b.id, err))
		}
		// A throttled or failed poll is tried again at the next tick.
	}
}

func (b *Box) setToolbox(sb sandbox) {
	if sb.ToolboxProxyURL == "" {
		return
	}
	b.mu.Lock()
	if b.tbc == nil {
		b.toolbox = strings.TrimRight(sb.ToolboxProxyURL, "/") + "/" + sb.ID
	}
	b.mu.Unlock()
}

// Status describes the sandbox; one deleted (or on its way out) is
// vendors.ErrNotFound.
func (b *Box) Status(ctx context.Context) (vendors.Info, error) {
	sb, err := b.v.getSandbox(ctx, b.id)
	if err != nil {
		return vendors.Info{}, fmt.Errorf("daytona: status: %w", typed("status", b.id, err))
	}
	if sb.deleted() {
		return vendors.Info{}, fmt.Errorf("daytona: status: %w", &vendors.NotFoundError{Vendor: Name, ID: b.id})
	}
	b.setToolbox(sb)
	return info(sb), nil
}

// Destroy deletes the sandbox; one already gone is not an error. A
// sandbox whose state is changing (still being created) is deleted once
// the change is done. A fork's snapshot goes with the last fork of it
// (fork.go).
func (b *Box) Destroy(ctx context.Context) error {
	for {
		err := b.v.deleteSandbox(ctx, b.id)
		switch st := status(err); {
		case err == nil, st == http.StatusNotFound:
			if b.forkSnap != "" {
				b.v.deleteForkSnapshot(ctx, b.forkOf, b.forkSnap)
			}
			return nil
		case st == http.StatusConflict && ctx.Err() == nil:
			// "Sandbox state change in progress": try again shortly.
			if serr := vendorhttp.Sleep(ctx, b.v.opts.poll); serr != nil {
				return fmt.Errorf("daytona: destroy box %s: %w (%w)", b.id, serr, err)
			}
		default:
			return fmt.Errorf("daytona: destroy box %s: %w", b.id, typed("destroy", b.id, err))
		}
	}
}

// Endpoint returns the port's preview URL, with the preview token every
// request must carry (unless the sandbox is public) and a transport that
// ends a request or stream with a *vendors.GoneError when the sandbox
// vanishes. Only ports the box was created with are served.
func (b *Box) Endpoint(ctx context.Context, port int) (vendors.Endpoint, error) {
	if !slices.Contains(b.ports, port) {
		return vendors.Endpoint{}, fmt.Errorf("daytona: box %s does not expose port %d", b.id, port)
	}
	p, err := b.v.getPreviewURL(ctx, b.id, port)
	if err != nil {
		return vendors.Endpoint{}, fmt.Errorf("daytona: endpoint: %w", typed("endpoint", b.id, err))
	}
	if p.URL == "" {
		return vendors.Endpoint{}, fmt.Errorf("daytona: endpoint: the preview URL of port %d is empty", port)
	}
	ep := vendors.Endpoint{URL: strings.TrimRight(p.URL, "/"), Transport: b.goneTransport()}
	if !b.public && p.Token != "" {
		ep.Header = http.Header{previewTokenHeader: {p.Token}}
	}
	return ep, nil
}

// previewTokenHeader carries a sandbox's preview token to its ports.
const previewTokenHeader = "X-Daytona-Preview-Token"

// gone reports whether the sandbox no longer runs (deleted, stopped or
// failed), asking the control plane on a context of its own.
func (b *Box) gone(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	sb, err := b.v.getSandbox(ctx, b.id)
	if status(err) == http.StatusNotFound {
		return true
	}
	return err == nil && (sb.deleted() || stateOf(sb.State) == vendors.StateStopped)
}

// lost returns err as a *vendors.GoneError when the sandbox no longer
// runs, for a failed toolbox call of op.
func (b *Box) lost(ctx context.Context, op string, err error) error {
	if b.gone(ctx) {
		return &vendors.GoneError{Vendor: Name, ID: b.id, Op: op, Err: err}
	}
	return err
}

func temporary(err error) bool {
	st := status(err)
	return st == http.StatusTooManyRequests || st >= 500 || st == 0
}
