package daytona

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Fork on Daytona is snapshot, then create: the suspended (stopped)
// sandbox's filesystem goes into a snapshot (POST /sandbox/{id}/snapshot,
// the sandbox snapshotting meanwhile and stopped again after), and each
// fork is a sandbox created from that snapshot with the source's
// environment, labels (its own create token, and the source as
// boxmeta.LabelForkOf), resources and intervals (so its retention and
// autoDeleteInterval are the source's), stopped once it started. Daytona's
// own fork (POST /sandbox/{id}/fork) is not used: it forks only a started
// VM sandbox, and boxes are container sandboxes. The snapshot is deleted
// when the fork fails, and else by the destroy of the last of its forks
// (a fork destroyed by id alone, its labels unknown, leaves it).

// forkSnapshotPrefix begins the names of fork snapshots.
const forkSnapshotPrefix = "boxctl-fork-"

// Fork makes n suspended sandboxes from suspended sandbox id's
// filesystem. See vendors.Suspender.
func (v *Vendor) Fork(ctx context.Context, id string, n int) (_ []string, err error) {
	if n < 1 {
		return nil, fmt.Errorf("daytona: fork: want at least one box, not %d", n)
	}
	src, _, err := v.suspendable(ctx, "fork", id)
	if err != nil {
		return nil, err
	}
	if src.State != StateStopped {
		reason := "only a suspended box forks"
		if stoppedState(src.State) {
			reason = "an archived box forks once it is resumed"
		}
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: id, Reason: reason + " (it is " + src.State + ")"}
	}
	begin := time.Now()
	snap := forkSnapshotPrefix + src.ID[:min(8, len(src.ID))] + "-" + vendors.CreateToken()[:10]
	if err := v.snapshotSandbox(ctx, src.ID, snap); err != nil {
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
			if derr := v.newBox(sandbox{ID: m}).Destroy(cctx); derr != nil {
				err = &vendors.CleanupError{Vendor: Name, BoxID: m, Err: errors.Join(err, derr)}
				return
			}
		}
		v.deleteSnapshot(cctx, snap)
	}()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { made[i], errs[i] = v.forkOne(ctx, src, snap) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("daytona: fork box %s: %w", id, err)
	}
	v.opts.log.Debug("daytona sandbox forked", "id", id, "forks", n, "snapshot", snapTook, "took", time.Since(begin))
	return made, nil
}

// snapshotSandbox takes sandbox id's filesystem into snapshot name and
// waits until the sandbox is no longer snapshotting and the snapshot is
// active. An answer that leaves the outcome unknown (a conflict, a server
// error, a lost connection: the call may have taken effect, or another
// change was in progress) is followed by a wait for the sandbox to settle
// and a look-up of the snapshot before the call is made again.
func (v *Vendor) snapshotSandbox(ctx context.Context, id, name string) (err error) {
	defer func() {
		if err != nil {
			v.deleteSnapshot(context.WithoutCancel(ctx), name)
			err = fmt.Errorf("daytona: fork box %s: snapshot: %w", id, err)
		}
	}()
	settled := func(s string) bool { return s != StateSnapshotting && s != StateStopping }
	for {
		_, err := v.api.Do(ctx, vendorhttp.Call{Method: http.MethodPost, Path: "/sandbox/" + url.PathEscape(id) + "/snapshot",
			Body: map[string]string{"name": name}})
		if err == nil {
			break
		}
		if st := status(err); (st != 0 && st != http.StatusConflict && st < 500) || ctx.Err() != nil {
			return typed("fork", id, err)
		}
		if _, werr := v.waitState(ctx, id, settled); werr != nil {
			return errors.Join(werr, err)
		}
		if _, serr := v.Snapshot(ctx, name); serr == nil {
			break // the call took effect
		}
		if serr := vendorhttp.Sleep(ctx, v.opts.poll); serr != nil {
			return errors.Join(serr, err)
		}
	}
	if _, err := v.waitState(ctx, id, settled); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, v.opts.createTimeout)
	defer cancel()
	_, err = v.waitSnapshot(wctx, name, nil)
	return err
}

// forkOne creates a sandbox of snapshot snap like src, waits until it is
// started, then stops it; it returns its id (also when it failed after the
// create, so that it can be removed).
func (v *Vendor) forkOne(ctx context.Context, src sandbox, snap string) (string, error) {
	token := vendors.CreateToken()
	labels := maps.Clone(src.Labels)
	labels[boxmeta.LabelForkOf] = src.ID
	labels[boxmeta.LabelCreate] = token
	req := createSandbox{
		Name:                labels[boxmeta.LabelRunTag] + "-" + token[:12],
		Snapshot:            snap,
		Env:                 maps.Clone(src.Env),
		Labels:              labels,
		Public:              src.Public,
		CPU:                 int(math.Ceil(src.CPU)),
		Memory:              int(math.Ceil(src.Memory)),
		Disk:                int(math.Ceil(src.Disk)),
		AutoStopInterval:    int(src.AutoStopInterval),
		AutoArchiveInterval: int(src.AutoArchiveInterval),
		AutoDeleteInterval:  int(src.AutoDeleteInterval),
	}
	sb, err := v.create(ctx, req)
	if err != nil {
		return "", err
	}
	b := v.newBox(sb)
	if err := b.waitStarted(ctx, sb); err != nil {
		return sb.ID, err
	}
	if err := v.lifecycle(ctx, sb.ID, "stop"); err != nil {
		return sb.ID, err
	}
	if _, err := v.waitState(ctx, sb.ID, func(s string) bool { return s == StateStopped }); err != nil {
		return sb.ID, err
	}
	return sb.ID, nil
}

// deleteSnapshot deletes snapshot name, best effort: a snapshot left is
// only storage.
func (v *Vendor) deleteSnapshot(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := v.Snapshot(ctx, name)
	if err == nil {
		err = v.do(ctx, http.MethodDelete, "/snapshots/"+url.PathEscape(s.ID), nil, nil)
	}
	if err != nil && status(err) != http.StatusNotFound {
		v.opts.log.Debug("daytona: fork snapshot not deleted", "snapshot", name, "err", err)
	}
}

// deleteForkSnapshot deletes fork snapshot name, made of box forkOf, once
// no fork of it is left: Daytona itself does not refuse deleting a
// snapshot in use.
func (v *Vendor) deleteForkSnapshot(ctx context.Context, forkOf, name string) {
	l, err := v.listSandboxes(ctx, map[string]string{boxmeta.LabelManaged: "true", boxmeta.LabelForkOf: forkOf})
	if err != nil {
		v.opts.log.Debug("daytona: fork snapshot kept", "snapshot", name, "err", err)
		return
	}
	for _, sb := range l {
		if sb.Snapshot == name && !sb.deleted() {
			return
		}
	}
	v.deleteSnapshot(ctx, name)
}
