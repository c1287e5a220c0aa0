package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// A suspendable box (CreateSpec.Retention) is a container without
// auto-remove whose lifetimes live in a file of its own writable layer,
// written by the engine as root (the box's user cannot change it):
//
//	deadline=<unix>   the active deadline box-init enforces at each start
//	state=running|suspended
//	budget=<seconds>  active time left, while suspended
//	suspended=<unix>  when it was suspended
//	retain=<unix>     when the suspended box is to be removed
//
// The container's entrypoint reads deadline= before box-init starts, so
// each start of the box gets what is left of its budget, and a start that
// is not a Resume (deadline= is the suspend's time then) ends at once.
// Suspend stops the container (its processes end; its writable layer, the
// workspace, the bridge's store and the harnesses' session files stay);
// nothing ends a suspended container by itself, so gc removes it past its
// retention: List reports Info.Deadline from the file (the active deadline
// while it runs, the retention while suspended).
const (
	lifetimeDir  = "/etc/boxctl"
	lifetimeFile = lifetimeDir + "/lifetime"
)

// deadlineWrapper runs before box-init: it takes deadline= of the lifetime
// file as BOX_DEADLINE.
var deadlineWrapper = `while IFS== read -r k v; do [ "$k" != deadline ] || { ` + boxmeta.EnvDeadline + `=$v; export ` +
	boxmeta.EnvDeadline + `; }; done < ` + lifetimeFile + ` 2>/dev/null; exec "$@"`

var _ vendors.Suspender = (*Vendor)(nil)

// lifetime is the lifetime file of a suspendable box.
type lifetime struct {
	Deadline    time.Time
	Suspended   bool
	BudgetLeft  time.Duration
	SuspendedAt time.Time
	RetainUntil time.Time
}

func (l lifetime) encode() []byte {
	var b bytes.Buffer
	state := "running"
	if l.Suspended {
		state = "suspended"
	}
	fmt.Fprintf(&b, "deadline=%s\nstate=%s\n", boxmeta.FormatDeadline(l.Deadline), state)
	if l.Suspended {
		fmt.Fprintf(&b, "budget=%d\nsuspended=%d\nretain=%d\n", int64(l.BudgetLeft/time.Second), l.SuspendedAt.Unix(), l.RetainUntil.Unix())
	}
	return b.Bytes()
}

func decodeLifetime(data []byte) (lifetime, error) {
	var l lifetime
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if k != "state" && err != nil {
			return l, fmt.Errorf("lifetime file: %s=%q is not a number", k, v)
		}
		switch k {
		case "deadline":
			l.Deadline = time.Unix(n, 0)
		case "state":
			l.Suspended = v == "suspended"
		case "budget":
			l.BudgetLeft = time.Duration(n) * time.Second
		case "suspended":
			l.SuspendedAt = time.Unix(n, 0)
		case "retain":
			l.RetainUntil = time.Unix(n, 0)
		}
	}
	if l.Deadline.IsZero() {
		return l, errors.New("lifetime file has no deadline")
	}
	return l, nil
}

// suspendable prepares the container of a spec with a retention: no
// auto-remove, the retention label, the deadline wrapper before box-init.
func (v *Vendor) suspendable(ctx context.Context, spec vendors.CreateSpec, cfg *container.Config, host *container.HostConfig) error {
	if spec.Retention <= 0 {
		return nil
	}
	img, err := v.cli.ImageInspect(ctx, spec.Image)
	if err != nil || img.Config == nil {
		return fmt.Errorf("docker: create box: image %s: %w", spec.Image, err)
	}
	ep := img.Config.Entrypoint
	i := slices.IndexFunc(ep, func(a string) bool { return strings.HasSuffix(a, "/"+boxInit) || a == boxInit })
	if i < 0 {
		return &vendors.SpecError{Vendor: Name, Err: fmt.Errorf("image %s does not run %s", spec.Image, boxInit)}
	}
	cfg.Entrypoint = append(append(slices.Clone(ep[:i]), "/bin/sh", "-c", deadlineWrapper, "box-start"), ep[i:]...)
	cfg.Labels[boxmeta.LabelRetention] = strconv.FormatInt(int64(spec.Retention/time.Second), 10)
	host.AutoRemove = false
	return nil
}

// writeLifetime replaces the lifetime file of container id (running or
// not).
func (v *Vendor) writeLifetime(ctx context.Context, id string, l lifetime) error {
	data := l.encode()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(lifetimeDir, "/") + "/", Mode: 0o755, ModTime: now})
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(lifetimeFile, "/"), Mode: 0o644, Size: int64(len(data)), ModTime: now})
	_, _ = tw.Write(data)
	if err := tw.Close(); err != nil {
		return err
	}
	if err := v.cli.CopyToContainer(ctx, id, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("docker: write the lifetime of box %s: %w", short(id), v.mapErr(err, id))
	}
	return nil
}

// readLifetime reads the lifetime file of container id.
func (v *Vendor) readLifetime(ctx context.Context, id string) (lifetime, error) {
	rc, _, err := v.cli.CopyFromContainer(ctx, id, lifetimeFile)
	if err != nil {
		return lifetime{}, fmt.Errorf("docker: read the lifetime of box %s: %w", short(id), v.mapErr(err, id))
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return lifetime{}, fmt.Errorf("docker: read the lifetime of box %s: %w", short(id), err)
	}
	data, err := io.ReadAll(io.LimitReader(tr, 4096))
	if err != nil {
		return lifetime{}, err
	}
	return decodeLifetime(data)
}

// withLifetime completes the Info of a suspendable box from its lifetime
// file: its deadline, and StateSuspended. A box whose file cannot be read
// keeps its create deadline.
func (v *Vendor) withLifetime(ctx context.Context, i vendors.Info) vendors.Info {
	if i.Labels[boxmeta.LabelRetention] == "" {
		return i
	}
	l, err := v.readLifetime(ctx, i.ID)
	if err != nil {
		return i
	}
	i.Deadline = l.Deadline
	if l.Suspended && i.State != vendors.StateRunning {
		i.State, i.Deadline = vendors.StateSuspended, l.RetainUntil
	}
	return i
}

// retention returns the retention of a suspendable container, or an
// error naming why it is not one.
func (v *Vendor) retention(ctx context.Context, id string) (container.InspectResponse, time.Duration, error) {
	c, err := v.cli.ContainerInspect(ctx, id)
	if err != nil {
		return c, 0, fmt.Errorf("docker: %w", v.mapErr(err, id))
	}
	if c.Config == nil || c.Config.Labels[boxmeta.LabelManaged] != "true" {
		return c, 0, fmt.Errorf("docker: container %s is not a boxctl box: %w", id, &vendors.NotFoundError{Vendor: Name, ID: id})
	}
	secs, err := strconv.ParseInt(c.Config.Labels[boxmeta.LabelRetention], 10, 64)
	if err != nil || secs <= 0 {
		return c, 0, &vendors.NotSuspendableError{Vendor: Name, ID: c.ID, Reason: "it was made without a retention"}
	}
	return c, time.Duration(secs) * time.Second, nil
}

// stopGrace is how long a suspend waits for the box's init to end before
// the engine kills what is left.
const stopGrace = 5

// Suspend stops the container and keeps its writable layer. See
// vendors.Suspender.
func (v *Vendor) Suspend(ctx context.Context, id string) (vendors.SuspendInfo, error) {
	c, retain, err := v.retention(ctx, id)
	if err != nil {
		return vendors.SuspendInfo{}, err
	}
	l, err := v.readLifetime(ctx, c.ID)
	if err != nil {
		return vendors.SuspendInfo{}, err
	}
	if l.Suspended && (c.State == nil || !c.State.Running) {
		return vendors.SuspendInfo{SuspendedAt: l.SuspendedAt, BudgetLeft: l.BudgetLeft, RetainUntil: l.RetainUntil}, nil
	}
	now := time.Now()
	left := l.Deadline.Sub(now).Truncate(time.Second)
	if left <= 0 || c.State == nil || !c.State.Running {
		return vendors.SuspendInfo{}, &vendors.RetentionError{Vendor: Name, ID: c.ID, Until: l.Deadline, Budget: true}
	}
	grace := stopGrace
	if err := v.cli.ContainerStop(ctx, c.ID, container.StopOptions{Timeout: &grace}); err != nil {
		return vendors.SuspendInfo{}, fmt.Errorf("docker: suspend box %s: %w", short(c.ID), v.mapErr(err, c.ID))
	}
	// deadline= is now: a start that is not a Resume ends at once.
	s := lifetime{Deadline: now, Suspended: true, BudgetLeft: left, SuspendedAt: now, RetainUntil: now.Add(retain)}
	if err := v.writeLifetime(ctx, c.ID, s); err != nil {
		return vendors.SuspendInfo{}, err
	}
	v.opts.logger.Debug("docker box suspended", "id", short(c.ID), "budget_left", left)
	return vendors.SuspendInfo{SuspendedAt: now, BudgetLeft: left, RetainUntil: s.RetainUntil}, nil
}

// Resume starts the suspended container with what is left of its budget
// and clears the records of the processes its earlier run left. See
// vendors.Suspender.
func (v *Vendor) Resume(ctx context.Context, id string) (vendors.Box, error) {
	c, _, err := v.retention(ctx, id)
	if err != nil {
		return nil, err
	}
	l, err := v.readLifetime(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	if !l.Suspended || (c.State != nil && c.State.Running) {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: c.ID, Reason: "it is not suspended"}
	}
	now := time.Now()
	if now.After(l.RetainUntil) {
		return nil, &vendors.RetentionError{Vendor: Name, ID: c.ID, Until: l.RetainUntil}
	}
	if l.BudgetLeft <= 0 {
		return nil, &vendors.RetentionError{Vendor: Name, ID: c.ID, Until: l.SuspendedAt, Budget: true}
	}
	if err := v.writeLifetime(ctx, c.ID, lifetime{Deadline: now.Add(l.BudgetLeft)}); err != nil {
		return nil, err
	}
	if err := v.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		// Put the record back, so the box stays resumable.
		_ = v.writeLifetime(context.WithoutCancel(ctx), c.ID, l)
		return nil, fmt.Errorf("docker: resume box %s: %w", short(c.ID), v.mapErr(err, c.ID))
	}
	b := v.newBox(c.ID)
	// Every process of the earlier run ended with it; its records would
	// keep their names taken.
	res, err := b.Exec(ctx, vendors.ExecSpec{Command: []string{"rm", "-rf", boxproc.Dir, boxproc.ExecDir}})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("rm exited %d: %s", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	if err != nil {
		return nil, fmt.Errorf("docker: resume box %s: clear its process records: %w", short(c.ID), err)
	}
	v.opts.logger.Debug("docker box resumed", "id", short(c.ID), "deadline", now.Add(l.BudgetLeft))
	return b, nil
}

// Fork commits the suspended container's filesystem to an image and makes
// n suspended containers of it, with the source's configuration, labels
// and lifetime file. The image goes with the last of them (Destroy). See
// vendors.Suspender.
func (v *Vendor) Fork(ctx context.Context, id string, n int) (_ []string, err error) {
	if n < 1 {
		return nil, fmt.Errorf("docker: fork: want at least one box, not %d", n)
	}
	c, _, err := v.retention(ctx, id)
	if err != nil {
		return nil, err
	}
	if l, err := v.readLifetime(ctx, c.ID); err != nil {
		return nil, err
	} else if !l.Suspended || (c.State != nil && c.State.Running) {
		return nil, &vendors.NotSuspendableError{Vendor: Name, ID: c.ID, Reason: "only a suspended box forks"}
	}
	begin := time.Now()
	commit, err := v.cli.ContainerCommit(ctx, c.ID, container.CommitOptions{Pause: false,
		Comment: "fork of box " + short(c.ID)})
	commitTook := time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("docker: fork box %s: commit: %w", short(c.ID), v.mapErr(err, c.ID))
	}
	var made []string
	defer func() {
		if err == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, m := range made {
			if derr := v.newBox(m).Destroy(cctx); derr != nil {
				err = &vendors.CleanupError{Vendor: Name, BoxID: m, Err: errors.Join(err, derr)}
				return
			}
		}
		_, _ = v.cli.ImageRemove(cctx, commit.ID, image.RemoveOptions{PruneChildren: true})
	}()
	runTag := c.Config.Labels[boxmeta.LabelRunTag]
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cfg := *c.Config
			cfg.Image = commit.ID
			cfg.Labels = maps.Clone(c.Config.Labels)
			cfg.Labels[boxmeta.LabelForkOf] = c.ID
			delete(cfg.Labels, boxmeta.LabelCreate)
			cfg.Hostname = ""
			name := "boxctl-" + runTag + "-" + strconv.FormatUint(rand.Uint64()&0xffffffffff, 36)
			// The client normalizes the host config in place: a copy each.
			hc := *c.HostConfig
			hc.CapAdd, hc.CapDrop = slices.Clone(hc.CapAdd), slices.Clone(hc.CapDrop)
			created, cerr := v.cli.ContainerCreate(ctx, &cfg, &hc, nil, nil, name)
			if cerr != nil {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				_ = v.cli.ContainerRemove(cctx, name, container.RemoveOptions{Force: true})
				cancel()
				errs[i] = fmt.Errorf("docker: fork box %s: create: %w", short(c.ID), v.mapErr(cerr, ""))
				return
			}
			ids[i] = created.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != "" {
			made = append(made, id)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	v.opts.logger.Debug("docker box forked", "id", short(c.ID), "forks", n, "commit", commitTook, "took", time.Since(begin))
	return made, nil
}

// removeForkImage removes the committed image a fork ran from once no
// container uses it (an image still in use stays).
func (v *Vendor) removeForkImage(ctx context.Context, img string) {
	_, err := v.cli.ImageRemove(ctx, img, image.RemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
		v.opts.logger.Debug("docker: fork image not removed", "image", img, "err", err)
	}
}
