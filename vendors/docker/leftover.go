package docker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/prometheus/procfs"

	"github.com/tangle-network/boxctl/vendors"
)

// leftoverGrace is how old the shim of a container the engine still
// lists as created must be before Sweep takes its start for failed: a
// start in progress has a shim and a sandbox too.
const leftoverGrace = 30 * time.Second

// engineNamespace is the containerd namespace of the Docker engine's
// containers, as its shims carry it.
const engineNamespace = "moby"

// Sweep ends what failed starts under gVisor left on this machine: a start
// that fails under runsc (a network mode it refuses, say) can leave its
// shim, sandbox and gofer running after the engine forgot the container.
// Sweep finds the engine's shims whose children are runsc processes and
// whose container the engine no longer lists, or lists as never started
// (for longer than leftoverGrace), and kills each such process tree; with
// dryRun it only lists them. It sees this machine's processes: the engine
// is local (boxes publish their ports on its loopback), but an engine in a
// virtual machine of its own keeps its processes there, and Sweep finds
// none.
func (v *Vendor) Sweep(ctx context.Context, dryRun bool) ([]vendors.Leftover, error) {
	return v.sweep(ctx, "", dryRun)
}

// sweep is Sweep, narrowed to the container id only when it is set: the
// one whose start just failed, which needs no grace.
func (v *Vendor) sweep(ctx context.Context, only string, dryRun bool) ([]vendors.Leftover, error) {
	procs, err := readProcs()
	if err != nil {
		return nil, fmt.Errorf("docker: sweep: %w", err)
	}
	var out []vendors.Leftover
	for _, shim := range procs.shims() {
		if only != "" && shim.id != only {
			continue
		}
		tree := procs.tree(shim.pid)
		if !procs.anyRunsc(tree) {
			continue
		}
		if only == "" {
			if left, err := v.abandoned(ctx, shim.id, shim.age); err != nil || !left {
				continue
			}
		}
		l := vendors.Leftover{BoxID: shim.id, PIDs: tree}
		if !dryRun {
			l.Err = kill(ctx, tree)
		}
		out = append(out, l)
	}
	return out, nil
}

// endLeftover ends what the failed start of container id left running.
func (v *Vendor) endLeftover(ctx context.Context, id string) error {
	left, err := v.sweep(ctx, id, false)
	for _, l := range left {
		err = errors.Join(err, l.Err)
	}
	return err
}

// abandoned reports whether the engine no longer runs container id: it
// does not list it, or lists it as exited, dead, or created for longer
// than the grace (a start that failed but left the record).
func (v *Vendor) abandoned(ctx context.Context, id string, age time.Duration) (bool, error) {
	c, err := v.cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return true, nil
	}
	if err != nil || c.State == nil {
		return false, err
	}
	switch c.State.Status {
	case "exited", "dead":
		return true, nil
	case "created":
		return age > leftoverGrace, nil
	}
	return false, nil
}

// kill sends SIGKILL to every process of tree, children first, and waits
// until they are gone.
func kill(ctx context.Context, tree []int) error {
	var errs []error
	for _, pid := range slices.Backward(tree) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill %d: %w", pid, err))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, pid := range tree {
		for alive(pid) {
			select {
			case <-ctx.Done():
				return errors.Join(append(errs, fmt.Errorf("process %d still runs: %w", pid, ctx.Err()))...)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return errors.Join(errs...)
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.State != "Z"
}

// procTable is a snapshot of this machine's processes.
type procTable struct {
	cmd      map[int][]string
	children map[int][]int
	stat     map[int]procfs.ProcStat
}

// shim is a containerd shim of the engine's namespace.
type shim struct {
	pid int
	id  string
	age time.Duration
}

func readProcs() (*procTable, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, err
	}
	all, err := fs.AllProcs()
	if err != nil {
		return nil, err
	}
	t := &procTable{cmd: map[int][]string{}, children: map[int][]int{}, stat: map[int]procfs.ProcStat{}}
	for _, p := range all {
		ps, err := p.Stat()
		if err != nil {
			continue // gone since the listing
		}
		cmd, _ := p.CmdLine()
		t.cmd[p.PID] = cmd
		t.stat[p.PID] = ps
		t.children[ps.PPID] = append(t.children[ps.PPID], p.PID)
	}
	return t, nil
}

// shims lists the engine's containerd shims with the container each runs.
func (t *procTable) shims() []shim {
	var out []shim
	for pid, cmd := range t.cmd {
		if len(cmd) == 0 || !strings.HasPrefix(filepath.Base(cmd[0]), "containerd-shim") {
			continue
		}
		ns, id := flagValue(cmd, "namespace"), flagValue(cmd, "id")
		if ns != engineNamespace || id == "" {
			continue
		}
		var age time.Duration
		if start, err := t.stat[pid].StartTime(); err == nil {
			age = time.Since(time.UnixMilli(int64(start * 1000)))
		}
		out = append(out, shim{pid: pid, id: id, age: age})
	}
	slices.SortFunc(out, func(a, b shim) int { return strings.Compare(a.id, b.id) })
	return out
}

// tree is pid and its descendants, parents before children.
func (t *procTable) tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, t.children[out[i]]...)
	}
	return out
}

// anyRunsc reports whether a process of pids is one of runsc's (its
// sandbox and gofer name themselves runsc-sandbox and runsc-gofer).
func (t *procTable) anyRunsc(pids []int) bool {
	for _, pid := range pids {
		if cmd := t.cmd[pid]; len(cmd) > 0 && strings.HasPrefix(filepath.Base(cmd[0]), "runsc") {
			return true
		}
	}
	return false
}

// flagValue returns the value of -name or --name in a command line, in
// either the "-name value" or the "-name=value" form.
func flagValue(cmd []string, name string) string {
	for i, a := range cmd {
		a = strings.TrimLeft(a, "-")
		if a == name && i+1 < len(cmd) {
			return cmd[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

var _ vendors.Sweeper = (*Vendor)(nil)
