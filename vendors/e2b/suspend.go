package e2b

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
// Fork snapshots the suspended sandbox and makes each fork of the
// snapshot (see Fork).
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
	if err := v.pause(ctx, id); err != nil {
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

// forkTimeout is the timeout of a sandbox while Fork works on it: the
// source while it runs for its snapshot, each fork until it pauses. Should
// Fork be cut short, they end no later.
const forkTimeout = 5 * time.Minute

// Fork makes n paused sandboxes of the paused sandbox id's memory and
// disk, through E2B's snapshots (spec/openapi.yml): a snapshot is of a
// live sandbox only, so the source runs for it (connect resumes it) and
// pauses again; the snapshot (POST /sandboxes/{id}/snapshots) is a
// template, and each fork a sandbox of it (POST /v2/sandboxes), with the
// source's metadata (its labels, LabelForkOf added), paused at once.
// Each fork holds the source's lifetime file, so its Resume gives it what
// was left of the source's budget. E2B refuses to delete a template while
// sandboxes of it live or are paused: the snapshot goes with the last of
// the forks (Box.Destroy), or at once when Fork fails. See
// vendors.Suspender.
func (v *Vendor) Fork(ctx context.Context, id string, n int) (_ []string, err error) {
	if n < 1 {
		return nil, fmt.Errorf("e2b: fork: want at least one box, not %d", n)
	}
	d, _, err := v.retention(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.State != statePaused {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "only a suspended box forks"}
	}
	begin := time.Now()
	snapID, err := v.snapshotPaused(ctx, id)
	if err != nil {
		return nil, err
	}
	snapTook := time.Since(begin)
	made := make([]string, n)
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, m := range made {
			if m == "" {
				continue
			}
			if derr := v.killSandbox(cctx, m); derr != nil && !isStatus(derr, http.StatusNotFound) {
				err = &vendors.CleanupError{Vendor: Name, BoxID: m, Err: errors.Join(err, v.mapErr("fork", m, derr))}
				return
			}
		}
		v.deleteTemplate(cctx, snapID)
	}()
	labels := maps.Clone(d.Metadata)
	labels[boxmeta.LabelForkOf] = id
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { made[i], errs[i] = v.forkOne(ctx, snapID, labels) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("e2b: fork sandbox %s: %w", id, err)
	}
	v.o.log.Debug("e2b sandbox forked", "id", id, "forks", n, "snapshot", snapTook, "took", time.Since(begin))
	return made, nil
}

// snapshotPaused resumes paused sandbox id, snapshots it and pauses it
// again; it returns the snapshot's ID, a template.
func (v *Vendor) snapshotPaused(ctx context.Context, id string) (string, error) {
	if _, err := v.connectSandbox(ctx, id, forkTimeout); err != nil {
		return "", v.mapErr("fork", id, err)
	}
	var snap struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	_, serr := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: sandboxPath(id, "/snapshots"),
		Body: map[string]any{}, Want: http.StatusCreated, Out: &snap})
	if serr == nil && snap.SnapshotID == "" {
		serr = errors.New("the snapshot has no ID")
	}
	if serr != nil {
		serr = v.mapErr("fork", id, serr)
	}
	if perr := v.pause(ctx, id); perr != nil {
		if serr == nil {
			v.deleteTemplate(context.WithoutCancel(ctx), snap.SnapshotID)
		}
		return "", errors.Join(serr, v.mapErr("fork: pause the source again", id, perr))
	}
	return snap.SnapshotID, serr
}

// forkOne makes one paused sandbox of template snapID with labels (a
// create token of its own added), and returns its id; on an error the id
// is of a sandbox left to remove, or "".
func (v *Vendor) forkOne(ctx context.Context, snapID string, labels map[string]string) (string, error) {
	token := vendors.CreateToken()
	labels = maps.Clone(labels)
	labels[boxmeta.LabelCreate] = token
	no := false
	req := newSandbox{TemplateID: snapID, Timeout: secondsOf(forkTimeout),
		Network: &networkConfig{AllowPublicTraffic: &no}, Metadata: labels}
	sb, err := v.createOnce(ctx, req, token)
	if err != nil {
		return "", err
	}
	b := v.newBox(sb)
	b.labels = labels
	if err := b.waitReady(ctx, v.o.readyTimeout); err != nil {
		return sb.SandboxID, err
	}
	if err := v.pause(ctx, sb.SandboxID); err != nil {
		return sb.SandboxID, v.mapErr("fork", sb.SandboxID, err)
	}
	return sb.SandboxID, nil
}

// pause pauses sandbox id; one paused already is not an error.
func (v *Vendor) pause(ctx context.Context, id string) error {
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: sandboxPath(id, "/pause"), Want: http.StatusNoContent,
		Idempotent: true})
	if isStatus(err, http.StatusConflict) {
		return nil
	}
	return err
}

// deleteTemplate deletes template ref (DELETE /templates/{templateID}),
// reporting whether it is gone. E2B refuses it (400) while a sandbox of
// the template runs or is paused.
func (v *Vendor) deleteTemplate(ctx context.Context, ref string) bool {
	_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodDelete, Path: "/templates/" + url.PathEscape(ref), Want: http.StatusNoContent})
	if err != nil && !isStatus(err, http.StatusNotFound) {
		v.o.log.Debug("e2b: template not deleted", "template", ref, "err", err)
		return false
	}
	return true
}
