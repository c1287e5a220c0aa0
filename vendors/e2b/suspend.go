package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Suspend on E2B is pause (the sandbox frozen, memory and disk kept; its
// timeout stops), and resume is connect, which resumes a paused sandbox,
// with what was left of the timeout as the new one. A sandbox's metadata is
// fixed at create, so the budget left is kept in the sandbox
// (lifetimeFile, written just before the pause), and the retention of a
// paused sandbox counts from the end its timeout had when it paused: List
// reports endAt plus the retention as its deadline, which gc enforces.
// Fork forks the suspended sandbox with one call (see Fork).
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
// source while it runs for the fork, each fork until it pauses. Should
// Fork be cut short, they end no later.
const forkTimeout = 5 * time.Minute

// maxForks is the most forks one fork call makes (SandboxForkRequest).
const maxForks = 100

// Fork makes n paused sandboxes of the paused sandbox id's memory and
// disk with E2B's fork (POST /sandboxes/{id}/fork, spec/openapi.yml): a
// fork is of a running sandbox, so the source runs for it (connect
// resumes it) and pauses again; the one call checkpoints it and starts n
// sandboxes of that checkpoint, each fork's outcome an entry of its own,
// and each fork made is paused at once. A fork has the source's metadata
// (E2B gives it the snapshot's: no label of its own, so no
// boxmeta.LabelForkOf) and holds the source's lifetime file, so its
// Resume gives it what was left of the source's budget. Should a fork
// fail, those made are destroyed. See vendors.Suspender.
func (v *Vendor) Fork(ctx context.Context, id string, n int) (_ []string, err error) {
	if n < 1 || n > maxForks {
		return nil, fmt.Errorf("e2b: fork: want 1 to %d boxes, not %d", maxForks, n)
	}
	d, _, err := v.retention(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.State != statePaused {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "only a suspended box forks"}
	}
	begin := time.Now()
	if _, err := v.connectSandbox(ctx, id, forkTimeout); err != nil {
		return nil, v.mapErr("fork", id, err)
	}
	results, ferr := v.forkSandbox(ctx, id, n)
	forkTook := time.Since(begin)
	if perr := v.pause(ctx, id); perr != nil {
		ferr = errors.Join(ferr, v.mapErr("fork: pause the source again", id, perr))
	}
	made := make([]string, 0, n)
	for _, r := range results {
		if r.Sandbox != nil && r.Sandbox.SandboxID != "" {
			made = append(made, r.Sandbox.SandboxID)
		}
	}
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, m := range made {
			if derr := v.killSandbox(cctx, m); derr != nil && !isStatus(derr, http.StatusNotFound) {
				err = &vendors.CleanupError{Vendor: Name, BoxID: m, Err: errors.Join(err, v.mapErr("fork", m, derr))}
				return
			}
		}
	}()
	if ferr != nil {
		return nil, fmt.Errorf("e2b: fork sandbox %s: %w", id, ferr)
	}
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	for i, r := range results {
		if r.Sandbox == nil || r.Sandbox.SandboxID == "" {
			errs[i] = v.mapErr("fork", "", r.err(id))
			continue
		}
		wg.Go(func() { errs[i] = v.pauseFork(ctx, *r.Sandbox) })
	}
	wg.Wait()
	if len(results) != n {
		errs = append(errs, fmt.Errorf("e2b: fork: %d results for %d forks", len(results), n))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("e2b: fork sandbox %s: %w", id, err)
	}
	v.o.log.Debug("e2b sandbox forked", "id", id, "forks", n, "fork", forkTook, "took", time.Since(begin))
	return made, nil
}

// forkResult is SandboxForkResult: a fork made, or why not.
type forkResult struct {
	Sandbox *sandbox `json:"sandbox"`
	Error   *struct {
		Code      int    `json:"code"`
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	} `json:"error"`
}

// err is the error of a fork that was not made, as an answer of the
// fork call of sandbox id with its status would be.
func (r forkResult) err(id string) error {
	ae := &vendorhttp.APIError{Vendor: Name, Method: http.MethodPost, Path: sandboxPath(id, "/fork"),
		Status: http.StatusInternalServerError, Message: "the fork has neither a sandbox nor an error"}
	if r.Error != nil {
		ae.Status, ae.Code, ae.Message = r.Error.Code, r.Error.ErrorCode, r.Error.Message
	}
	return ae
}

// forkSandbox forks running sandbox id into n (POST
// /sandboxes/{id}/fork), each fork with forkTimeout.
func (v *Vendor) forkSandbox(ctx context.Context, id string, n int) ([]forkResult, error) {
	var out []forkResult
	body := map[string]int{"timeout": secondsOf(forkTimeout), "count": n}
	if _, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: sandboxPath(id, "/fork"), Body: body,
		Want: http.StatusCreated, Out: &out}); err != nil {
		return nil, v.mapErr("fork", id, err)
	}
	return out, nil
}

// pauseFork waits for a fork's envd and pauses the fork.
func (v *Vendor) pauseFork(ctx context.Context, sb sandbox) error {
	if err := v.newBox(sb).waitReady(ctx, v.o.readyTimeout); err != nil {
		return err
	}
	if err := v.pause(ctx, sb.SandboxID); err != nil {
		return v.mapErr("fork", sb.SandboxID, err)
	}
	return nil
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
