package exact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// MarkerVar is set on the bubblewrap process of every exact process (not
// on the process itself, whose environment is its launch's) naming it, so
// that a leftover is recognised before it is signalled.
const MarkerVar = "BOX_BRIDGE_EXACT"

func marker(env string, pid int64) string {
	return MarkerVar + "=" + env + "/" + strconv.FormatInt(pid, 10)
}

// Why a process the manager stops ends.
const (
	stopKilled    = iota + 1 // a kill request
	stopTimedOut             // its timeoutMs
	stopCancelled            // its environment destroyed, or the bridge closing
)

// proc is a process the manager started and waits for.
type proc struct {
	key     procKey
	cmd     *exec.Cmd
	timeout time.Duration
	out     map[string]*stream

	mu     sync.Mutex
	why    int // the first stop asked for, 0 for none
	status wire.ExactProcessStatus
	done   chan struct{} // closed once status is terminal and recorded
}

// stop kills the process's tree (its bubblewrap, whose namespace dies
// with it) unless it was stopped before; the first reason stands.
func (p *proc) stop(why int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.why != 0 || p.status.Termination != nil {
		return
	}
	p.why = why
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

type termination struct {
	kind, signal string
	code         int
	timeoutMS    int64
}

// ended makes s terminal with t at now.
func ended(s *wire.ExactProcessStatus, t termination, now time.Time) {
	s.Running = false
	s.EndedAt = now.UTC().Format(time.RFC3339Nano)
	tt := &wire.ExactTermination{Kind: t.kind}
	switch t.kind {
	case wire.TerminationExit:
		code := t.code
		s.ExitCode, tt.ExitCode = code, &code
	case wire.TerminationTimeout:
		ms := t.timeoutMS
		s.ExitCode, tt.TimeoutMS = 124, &ms
	case wire.TerminationSignal:
		s.ExitCode, s.ExitSignal, tt.Signal = 128+int(unix.SignalNum(t.signal)), t.signal, t.signal
	default: // cancelled
		s.ExitCode = 128 + int(syscall.SIGKILL)
	}
	s.Termination = tt
}

func (m *Manager) record(ctx context.Context, env string, pgid int, s wire.ExactProcessStatus) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return m.opts.Store.SetExactProcess(ctx, store.ExactProcess{EnvID: env, PID: s.PID, Running: s.Running, PGID: pgid, Status: raw})
}

// Spawn starts launch in a live environment and returns its first status.
func (m *Manager) Spawn(ctx context.Context, id string, launch wire.ExactLaunch) (wire.ExactProcessStatus, error) {
	if err := launch.Validate(); err != nil {
		return wire.ExactProcessStatus{}, &RequestError{Msg: err.Error()}
	}
	_, env, err := m.live(ctx, id)
	if err != nil {
		return wire.ExactProcessStatus{}, err
	}
	if err := m.opts.Jailer.Probe(ctx); err != nil {
		return wire.ExactProcessStatus{}, err
	}
	st := m.opts.Store
	status := wire.ExactProcessStatus{Running: true, ExitCode: -1, StartedAt: st.Now().UTC().Format(time.RFC3339Nano)}
	pid, err := st.AddExactProcess(ctx, id, wire.MaxExactProcesses, func(pid int64) ([]byte, error) {
		status.PID = pid
		return json.Marshal(status)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return wire.ExactProcessStatus{}, ErrNotFound
	case errors.Is(err, store.ErrTooMany):
		return wire.ExactProcessStatus{}, &RequestError{Msg: fmt.Sprintf("an exact environment starts at most %d processes", wire.MaxExactProcesses)}
	case err != nil:
		return wire.ExactProcessStatus{}, err
	}
	_, err = m.start(id, pid, env, launch, status)
	if err != nil {
		// It never ran: recorded as a launch that could not execute.
		ended(&status, termination{kind: wire.TerminationExit, code: 127}, st.Now())
		return wire.ExactProcessStatus{}, errors.Join(fmt.Errorf("start exact process: %w", err),
			m.record(context.WithoutCancel(ctx), id, 0, status))
	}
	return status, nil
}

func (m *Manager) start(id string, pid int64, env wire.ExactEnvironment, l wire.ExactLaunch, status wire.ExactProcessStatus) (*proc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if err := os.MkdirAll(filepath.Join(m.envDir(id), "proc"), 0o700); err != nil {
		return nil, err
	}
	r := env.Resources
	path, args, err := m.opts.Jailer.ExactCommand(jail.Exact{Tmp: m.tmpDir(id), Executable: l.Executable, Args: l.Args,
		Cwd: l.Cwd, Env: l.Env, CPUs: int(math.Ceil(r.CPU)), DataBytes: uint64(r.MemoryMB) << 20, FileBytes: uint64(r.DiskMB) << 20})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = []string{marker(id, pid)}
	cmd.SysProcAttr = procAttr()
	if l.Stdin != nil {
		cmd.Stdin = bytes.NewReader([]byte(*l.Stdin))
	}
	p := &proc{key: procKey{id, pid}, cmd: cmd, timeout: time.Duration(l.TimeoutMS) * time.Millisecond,
		out: map[string]*stream{}, status: status, done: make(chan struct{})}
	var opened []io.Closer
	for _, name := range []string{"stdout", "stderr"} {
		s, err := newStream(m.outPath(id, pid, name))
		if err != nil {
			for _, c := range opened {
				c.Close()
			}
			return nil, err
		}
		opened = append(opened, s)
		p.out[name] = s
		if name == "stdout" {
			cmd.Stdout = s
		} else {
			cmd.Stderr = s
		}
	}
	// A stream is no file: exec copies each pipe into it from a goroutine
	// of its own, which cmd.Wait waits for.
	if err := cmd.Start(); err != nil {
		for _, c := range opened {
			c.Close()
		}
		return nil, err
	}
	m.procs[p.key] = p
	m.wg.Add(1)
	// Its process group is recorded before its end can be.
	if err := m.record(context.Background(), id, cmd.Process.Pid, status); err != nil {
		p.stop(stopCancelled)
		m.log.Error("record exact process start", "environment", id, "pid", pid, "err", err)
	}
	go m.wait(p, opened)
	return p, nil
}

// wait waits for p to end, records why and forgets it.
func (m *Manager) wait(p *proc, outs []io.Closer) {
	defer m.wg.Done()
	var timer *time.Timer
	if p.timeout > 0 {
		timer = time.AfterFunc(p.timeout, func() { p.stop(stopTimedOut) })
	}
	err := p.cmd.Wait()
	if timer != nil {
		timer.Stop()
	}
	for _, c := range outs {
		c.Close() // ends the stream: its followers read the rest and stop
	}
	t := termination{kind: wire.TerminationExit}
	var ee *exec.ExitError
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	p.mu.Lock()
	switch {
	case p.why == stopTimedOut:
		t = termination{kind: wire.TerminationTimeout, timeoutMS: p.timeout.Milliseconds()}
	case p.why == stopKilled:
		t = termination{kind: wire.TerminationSignal, signal: "SIGKILL"}
	case p.why == stopCancelled:
		t = termination{kind: wire.TerminationCancelled}
	case ws.Signaled():
		t = termination{kind: wire.TerminationSignal, signal: unix.SignalName(ws.Signal())}
	case errors.As(err, &ee):
		t.code = ee.ExitCode()
	case err != nil:
		t.code = 127
	}
	ended(&p.status, t, m.opts.Store.Now())
	s := p.status
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.record(ctx, p.key.env, 0, s); err != nil {
		m.log.Error("record exact process end", "environment", p.key.env, "pid", p.key.pid, "err", err)
	}
	m.mu.Lock()
	delete(m.procs, p.key)
	m.mu.Unlock()
	close(p.done)
}

// Processes returns the statuses of a live environment's processes.
func (m *Manager) Processes(ctx context.Context, id string) ([]wire.ExactProcessStatus, error) {
	if _, _, err := m.live(ctx, id); err != nil {
		return nil, err
	}
	recs, err := m.opts.Store.ExactProcesses(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]wire.ExactProcessStatus, 0, len(recs))
	for _, r := range recs {
		s, err := m.current(procKey{id, r.PID}, r.Status)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// current is a process's status: the live one, else the recorded one.
func (m *Manager) current(k procKey, recorded []byte) (wire.ExactProcessStatus, error) {
	m.mu.Lock()
	p := m.procs[k]
	m.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.status, nil
	}
	var s wire.ExactProcessStatus
	err := json.Unmarshal(recorded, &s)
	return s, err
}

// lookup returns a process's live handle (nil once it ended) and status.
func (m *Manager) lookup(ctx context.Context, id string, pid int64) (*proc, wire.ExactProcessStatus, error) {
	if _, _, err := m.live(ctx, id); err != nil {
		return nil, wire.ExactProcessStatus{}, err
	}
	m.mu.Lock()
	p := m.procs[procKey{id, pid}]
	m.mu.Unlock()
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p, p.status, nil
	}
	recs, err := m.opts.Store.ExactProcesses(ctx, id)
	if err != nil {
		return nil, wire.ExactProcessStatus{}, err
	}
	for _, r := range recs {
		if r.PID == pid {
			s, err := m.current(procKey{id, pid}, r.Status)
			return nil, s, err
		}
	}
	return nil, wire.ExactProcessStatus{}, ErrNotFound
}

// Status returns a process's status; with wait > 0 it waits that long for
// a running process to end.
func (m *Manager) Status(ctx context.Context, id string, pid int64, wait time.Duration) (wire.ExactProcessStatus, error) {
	p, s, err := m.lookup(ctx, id, pid)
	if err != nil || p == nil || wait <= 0 {
		return s, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
		return s, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, nil
}

// Kill force-stops a process's tree and returns its terminal status; a
// process that already ended keeps its status.
func (m *Manager) Kill(ctx context.Context, id string, pid int64) (wire.ExactProcessStatus, error) {
	p, s, err := m.lookup(ctx, id, pid)
	if err != nil || p == nil {
		return s, err
	}
	p.stop(stopKilled)
	select {
	case <-p.done:
	case <-ctx.Done():
		return s, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, nil
}
