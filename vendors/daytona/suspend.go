package daytona

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Suspend on Daytona is stop (POST /sandbox/{id}/stop: the sandbox runs
// nothing, its disk is kept) and resume is start (POST
// /sandbox/{id}/start). A suspendable box is made with its retention as
// the sandbox's autoDeleteInterval (a stopped sandbox is deleted that long
// after it stopped, by Daytona itself) and, for a retention past
// archiveAfter, an autoArchiveInterval of archiveAfter (a long suspend
// moves the disk to cold storage; start brings it back). Its retention is
// also a label, so List reports a stopped or archived box as suspended,
// with the stop time (updatedAt) plus the retention as its deadline, which
// gc enforces where Daytona did not.
//
// The active budget is the box's create deadline: the sandbox's
// environment is fixed at create, so its init's deadline does not move
// with a suspend.
//
// Fork is snapshot, then create (fork.go).

// archiveAfter is how long a suspendable sandbox stays stopped before
// Daytona archives it, when its retention is longer.
const archiveAfter = 24 * time.Hour

// retained makes req suspendable with retention retain (none when 0).
func retained(req *createSandbox, retain time.Duration) {
	if retain <= 0 {
		return
	}
	req.Labels[boxmeta.LabelRetention] = strconv.FormatInt(int64(retain/time.Second), 10)
	req.AutoDeleteInterval = int(math.Ceil(retain.Minutes()))
	if retain > archiveAfter {
		req.AutoArchiveInterval = int(archiveAfter / time.Minute)
	}
}

// retentionOf returns the retention of a suspendable sandbox.
func retentionOf(sb sandbox) (time.Duration, bool) {
	secs, err := strconv.ParseInt(sb.Labels[boxmeta.LabelRetention], 10, 64)
	if err != nil || secs <= 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// suspendable returns sandbox id, which must be a live box of ours made
// with a retention, and that retention.
func (v *Vendor) suspendable(ctx context.Context, op, id string) (sandbox, time.Duration, error) {
	sb, err := v.getSandbox(ctx, id)
	if err != nil {
		return sb, 0, fmt.Errorf("daytona: %s: %w", op, typed(op, id, err))
	}
	if sb.deleted() || sb.Labels[boxmeta.LabelManaged] != "true" {
		return sb, 0, fmt.Errorf("daytona: %s: %w", op, &vendors.NotFoundError{Vendor: Name, ID: id})
	}
	retain, ok := retentionOf(sb)
	if !ok {
		return sb, 0, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "it was made without a retention"}
	}
	return sb, retain, nil
}

func stoppedState(s string) bool {
	return s == StateStopped || s == StateArchived || s == StateArchiving
}

// Suspend stops the sandbox and waits until it is stopped. See
// vendors.Suspender.
func (v *Vendor) Suspend(ctx context.Context, id string) (vendors.SuspendInfo, error) {
	sb, retain, err := v.suspendable(ctx, "suspend", id)
	if err != nil {
		return vendors.SuspendInfo{}, err
	}
	deadline, _ := boxmeta.ParseDeadline(sb.Labels[boxmeta.LabelDeadline])
	if stoppedState(sb.State) {
		at, _ := time.Parse(time.RFC3339Nano, sb.UpdatedAt)
		return vendors.SuspendInfo{SuspendedAt: at, BudgetLeft: max(deadline.Sub(at), 0), RetainUntil: at.Add(retain)}, nil
	}
	now := time.Now()
	left := deadline.Sub(now).Truncate(time.Second)
	if !deadline.IsZero() && left <= 0 {
		return vendors.SuspendInfo{}, &vendors.RetentionError{Vendor: Name, ID: id, Until: deadline, Budget: true}
	}
	if err := v.lifecycle(ctx, id, "stop"); err != nil {
		return vendors.SuspendInfo{}, err
	}
	if _, err := v.waitState(ctx, id, stoppedState); err != nil {
		return vendors.SuspendInfo{}, fmt.Errorf("daytona: suspend: %w", err)
	}
	v.opts.log.Debug("daytona sandbox suspended", "id", id, "took", time.Since(now))
	return vendors.SuspendInfo{SuspendedAt: now, BudgetLeft: left, RetainUntil: now.Add(retain)}, nil
}

// Resume starts the stopped (or archived) sandbox, waits until it is
// started and ends whatever its earlier run left. See vendors.Suspender.
func (v *Vendor) Resume(ctx context.Context, id string) (vendors.Box, error) {
	sb, retain, err := v.suspendable(ctx, "resume", id)
	if err != nil {
		return nil, err
	}
	if !stoppedState(sb.State) {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: "it is not suspended (" + sb.State + ")"}
	}
	if at, err := time.Parse(time.RFC3339Nano, sb.UpdatedAt); err == nil && time.Now().After(at.Add(retain)) {
		return nil, &vendors.RetentionError{Vendor: Name, ID: id, Until: at.Add(retain)}
	}
	if d, err := boxmeta.ParseDeadline(sb.Labels[boxmeta.LabelDeadline]); err == nil && time.Now().After(d) {
		return nil, &vendors.RetentionError{Vendor: Name, ID: id, Until: d, Budget: true}
	}
	start := time.Now()
	// An archiving sandbox is still becoming archived: wait for it.
	if sb.State == StateArchiving {
		if sb, err = v.waitState(ctx, id, func(s string) bool { return s == StateArchived || s == StateStopped }); err != nil {
			return nil, fmt.Errorf("daytona: resume: %w", err)
		}
	}
	if err := v.lifecycle(ctx, id, "start"); err != nil {
		return nil, err
	}
	b := v.newBox(sb)
	next, err := v.getSandbox(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("daytona: resume: %w", typed("resume", id, err))
	}
	if err := b.waitStarted(ctx, next); err != nil {
		return nil, fmt.Errorf("daytona: resume: %w", err)
	}
	// A stopped sandbox may keep its processes and its sessions (the
	// emulator freezes them); a resumed box runs none of its earlier run.
	if err := v.endEarlier(ctx, b); err != nil {
		return nil, fmt.Errorf("daytona: resume: %w", err)
	}
	if err := b.endSessions(ctx); err != nil {
		return nil, fmt.Errorf("daytona: resume: %w", err)
	}
	v.opts.log.Debug("daytona sandbox resumed", "id", id, "took", time.Since(start))
	return b, nil
}

// toolboxWarmup bounds how long a just-started sandbox's toolbox may
// answer 502 (its proxy reaches no daemon yet) before a resume fails.
const toolboxWarmup = 30 * time.Second

// endEarlier ends the processes of the box's earlier run, again while the
// toolbox proxy answers 502 for a sandbox that just started: its daemon
// comes up after the control plane reports it started. The script is
// idempotent, so a repeat does no harm.
func (v *Vendor) endEarlier(ctx context.Context, b *Box) error {
	ctx, cancel := context.WithTimeout(ctx, min(toolboxWarmup, v.opts.createTimeout))
	defer cancel()
	for {
		err := vendors.EndEarlier(ctx, b)
		if status(err) != http.StatusBadGateway {
			return err
		}
		v.opts.log.Debug("daytona toolbox not reachable yet after start", "id", b.id, "err", err)
		if serr := vendorhttp.Sleep(ctx, v.opts.poll); serr != nil {
			return err
		}
	}
}

// lifecycle posts /sandbox/{id}/{verb} (stop, start), again while the
// control plane answers that a state change is in progress (409). Both
// are idempotent (stopping a stopped sandbox, or starting a started one,
// answers it as it is), so a failed call is retried as a GET is.
func (v *Vendor) lifecycle(ctx context.Context, id, verb string) error {
	for {
		_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: "/sandbox/" + url.PathEscape(id) + "/" + verb,
			Idempotent: true})
		if status(err) != http.StatusConflict || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("daytona: %s box %s: %w", verb, id, typed(verb, id, err))
			}
			return nil
		}
		if serr := vendorhttp.Sleep(ctx, v.opts.poll); serr != nil {
			return fmt.Errorf("daytona: %s box %s: %w (%w)", verb, id, serr, err)
		}
	}
}

// waitState polls sandbox id until ok(state), under opts.createTimeout.
func (v *Vendor) waitState(ctx context.Context, id string, ok func(string) bool) (sandbox, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, v.opts.createTimeout,
		fmt.Errorf("daytona: sandbox %s did not change state within %v", id, v.opts.createTimeout))
	defer cancel()
	for {
		sb, err := v.getSandbox(ctx, id)
		switch {
		case err != nil && ctx.Err() == nil && status(err) != http.StatusNotFound:
			// transient: poll again
		case err != nil:
			return sb, typed("status", id, err)
		case sb.deleted():
			return sb, &vendors.GoneError{Vendor: Name, ID: id, Op: "suspend", Err: errors.New("the sandbox was deleted")}
		case ok(sb.State):
			return sb, nil
		case sb.State == StateError:
			return sb, &CreateError{ID: id, State: sb.State, Reason: sb.ErrorReason}
		}
		if serr := vendorhttp.Sleep(ctx, v.opts.poll); serr != nil {
			return sb, context.Cause(ctx)
		}
	}
}
