package e2b

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/boxmeta"
	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
)

// Suspend on E2B is pause (the sandbox frozen, memory and disk kept; its
// timeout stops), and resume is connect, which resumes a paused sandbox,
// with what was left of the timeout as the new one. A sandbox's metadata is
// fixed at create, so the budget left is kept in the sandbox
// (lifetimeFile, written just before the pause), and the retention of a
// paused sandbox counts from the end its timeout had when it paused: List
// reports endAt plus the retention as its deadline, which gc enforces.
// Fork is refused for now. E2B's route for it is a snapshot
// (spec/openapi.yml: POST /sandboxes/{sandboxID}/snapshots, body
// {"name"?}, 201 with SnapshotInfo {"snapshotID", "names"}; GET /snapshots
// lists them): the sandbox pauses briefly and runs on, and the snapshot is
// a template that POST /v2/sandboxes takes as its templateID, once per
// fork. The emulator does not serve that route yet.
const lifetimeFile = "/tmp/.boxctl/lifetime"

var _ vendors.Suspender = (*Vendor)(nil)

// retention returns the sandbox's detail and retention.
func (v *Vendor) retention(ctx context.Context, id string) (sandboxDetail, time.Duration, error) {
	d, err := v.getSandbox(ctx, id)
	if err != nil {
		return d, 0, v.mapErr("suspend", id, err)
	}
	secs, err := strconv.ParseInt(d.Metadata[boxmeta.LabelRetention], 10, 64)
	if err != nil || secs <= 0 {
		return d, 0, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "it was made without a retention"}
	}
	return d, time.Duration(secs) * time.Second, nil
}

// Suspend pauses the sandbox. See vendors.Suspender.
func (v *Vendor) Suspend(ctx context.Context, id string) (vendors.SuspendInfo, error) {
	d, retain, err := v.retention(ctx, id)
	if err != nil {
		return vendors.SuspendInfo{}, err
	}
	if d.State == statePaused {
		return vendors.SuspendInfo{RetainUntil: d.EndAt.Add(retain)}, nil
	}
	now := time.Now()
	left := d.EndAt.Sub(now).Truncate(time.Second)
	if left <= 0 {
		return vendors.SuspendInfo{}, &vendors.RetentionError{Vendor: Name, ID: id, Until: d.EndAt, Budget: true}
	}
	box, err := v.Connect(ctx, id)
	if err != nil {
		return vendors.SuspendInfo{}, err
	}
	if err := box.Write(ctx, lifetimeFile, []byte("budget="+strconv.FormatInt(int64(left/time.Second), 10)+"\n"), 0o600); err != nil {
		return vendors.SuspendInfo{}, fmt.Errorf("e2b: suspend: %w", err)
	}
	if _, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: sandboxPath(id, "/pause"), Want: http.StatusNoContent}); err != nil && !isStatus(err, http.StatusConflict) {
		return vendors.SuspendInfo{}, v.mapErr("suspend", id, err)
	}
	return vendors.SuspendInfo{SuspendedAt: now, BudgetLeft: left, RetainUntil: d.EndAt.Add(retain)}, nil
}

// Resume connects to the paused sandbox (which resumes it), gives it its
// budget left as its timeout, and ends the processes of its earlier run.
// See vendors.Suspender.
func (v *Vendor) Resume(ctx context.Context, id string) (vendors.Box, error) {
	d, retain, err := v.retention(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.State != statePaused {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "it is not suspended"}
	}
	if until := d.EndAt.Add(retain); time.Now().After(until) {
		return nil, &vendors.RetentionError{Vendor: Name, ID: id, Until: until}
	}
	sb, err := v.connectSandbox(ctx, id, time.Minute)
	if err != nil {
		return nil, v.mapErr("resume", id, err)
	}
	b := v.newBox(sb)
	b.setDetail(d)
	raw, err := b.Read(ctx, lifetimeFile)
	if err != nil {
		return nil, fmt.Errorf("e2b: resume: %w", err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(string(raw), "budget=")), 10, 64)
	if err != nil || secs <= 0 {
		return nil, &vendors.RetentionError{Vendor: Name, ID: id, Until: d.EndAt, Budget: true}
	}
	body := map[string]int64{"timeout": secs}
	if _, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: sandboxPath(id, "/timeout"), Body: body, Want: http.StatusNoContent}); err != nil {
		return nil, v.mapErr("resume", id, err)
	}
	// A pause keeps processes; a resumed box starts none of its earlier
	// run (the bridge stopped before the pause; anything else ends now).
	if err := vendors.EndEarlier(ctx, b); err != nil {
		return nil, fmt.Errorf("e2b: resume: %w", err)
	}
	return b, nil
}

// Fork is refused on E2B for now. See vendors.Suspender.
func (v *Vendor) Fork(_ context.Context, id string, _ int) ([]string, error) {
	return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "fork is not implemented for e2b sandboxes"}
}
