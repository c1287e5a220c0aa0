package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/internal/boxproc"
	"github.com/tangle-network/boxctl/vendors"
)

// The process service's messages (process.proto), in protojson.
type (
	processConfig struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args,omitempty"`
		Envs map[string]string `json:"envs,omitempty"`
		Cwd  string            `json:"cwd,omitempty"`
	}
	startRequest struct {
		Process processConfig `json:"process"`
		Tag     string        `json:"tag,omitempty"`
		Stdin   *bool         `json:"stdin,omitempty"`
	}
	processSelector struct {
		PID uint32 `json:"pid,omitempty"`
		Tag string `json:"tag,omitempty"`
	}
	connectRequest struct {
		Process processSelector `json:"process"`
	}
	sendSignalRequest struct {
		Process processSelector `json:"process"`
		Signal  string          `json:"signal"`
	}
	// processEvent is StartResponse / ConnectResponse: {"event": {...}}.
	processEvent struct {
		Event struct {
			Start *struct {
				PID uint32 `json:"pid"`
			} `json:"start"`
			Data *struct {
				Stdout []byte `json:"stdout"`
				Stderr []byte `json:"stderr"`
			} `json:"data"`
			End *struct {
				ExitCode int    `json:"exitCode"`
				Exited   bool   `json:"exited"`
				Status   string `json:"status"`
				Error    string `json:"error"`
			} `json:"end"`
			Keepalive *struct{} `json:"keepalive"`
		} `json:"event"`
	}
)

const (
	procStart      = "/process.Process/Start"
	procConnect    = "/process.Process/Connect"
	procSendSignal = "/process.Process/SendSignal"
)

// supervisor runs a spawned process. envd starts it with the process's
// environment (StartRequest.process.envs, which the control plane never
// shows); it hands the variables named in $2 on to a clean shell through
// a here-document and execs into it (the same process, so envd's end of
// it is the process's), so that from then on only the started process
// holds them in its environment, as with the Docker vendor. That shell
// starts "$@" in the background with its output in files, prints its pid,
// waits for it and records its exit status. $1 is the process's directory
// under boxproc.Dir.
const supervisor = `_bxd=$1; _bxnames=$2; shift 2
_bxlines=; _bxunset=
for _bxname in $_bxnames; do
	eval "_bxval=\${$_bxname}"
	_bxlines="$_bxlines$_bxname=$(printf %s "$_bxval" | base64 | tr -d '\n')
"
	_bxunset="$_bxunset -u $_bxname"
done
exec env $_bxunset /bin/sh -c "$0" boxctl-spawn "$_bxd" "$@" <<EOF
$_bxlines
EOF`

// start starts a process through envd and returns its stream after the
// start event, with envd's pid of it.
func (b *Box) start(ctx context.Context, op string, req startRequest) (*streamReader, uint32, error) {
	no := false
	req.Stdin = &no
	s, err := b.stream(ctx, procStart, req)
	if err != nil {
		return nil, 0, err
	}
	for {
		ev, err := b.nextEvent(ctx, op, s)
		if err != nil {
			s.close()
			return nil, 0, err
		}
		if ev.Event.Start != nil {
			return s, ev.Event.Start.PID, nil
		}
	}
}

// nextEvent returns the next process event of s that is not a keepalive.
// A stream that ended without an end event is an error; one cut off is a
// *vendors.GoneError when the sandbox is gone.
func (b *Box) nextEvent(ctx context.Context, op string, s *streamReader) (processEvent, error) {
	for {
		msg, err := s.next()
		switch {
		case errors.Is(err, errStreamCut):
			return processEvent{}, b.gone(ctx, op, err)
		case errors.Is(err, io.EOF):
			return processEvent{}, fmt.Errorf("e2b: %s: the process stream ended without the process's end", op)
		case err != nil:
			return processEvent{}, fmt.Errorf("e2b: %s: %w", op, err)
		}
		var ev processEvent
		if err := json.Unmarshal(msg, &ev); err != nil {
			return processEvent{}, fmt.Errorf("e2b: %s: process event: %w", op, err)
		}
		if ev.Event.Keepalive == nil {
			return ev, nil
		}
	}
}

// signalPID sends SIGTERM or SIGKILL to a process envd started.
func (b *Box) signalPID(ctx context.Context, pid uint32, sig syscall.Signal) error {
	name := "SIGNAL_SIGKILL"
	if sig == syscall.SIGTERM {
		name = "SIGNAL_SIGTERM"
	}
	return b.unary(ctx, procSendSignal, sendSignalRequest{Process: processSelector{PID: pid}, Signal: name}, &struct{}{})
}

// Exec runs a command to completion through envd. If ctx ends first, the
// command is killed in the sandbox (envd keeps a process whose stream was
// dropped running).
func (b *Box) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	if len(spec.Command) == 0 {
		return vendors.ExecResult{}, errors.New("e2b: exec: empty command")
	}
	if err := boxproc.CheckEnv(spec.Env); err != nil {
		return vendors.ExecResult{}, fmt.Errorf("e2b: exec: %w", err)
	}
	cmd := spec.Command
	if spec.Stdin != nil {
		in, err := io.ReadAll(spec.Stdin)
		if err != nil {
			return vendors.ExecResult{}, fmt.Errorf("e2b: exec: read stdin: %w", err)
		}
		f := stdinDir + "/" + boxproc.RandomID()
		if err := b.writeFile(ctx, f, in); err != nil {
			return vendors.ExecResult{}, fmt.Errorf("e2b: exec: stdin: %w", err)
		}
		cmd = append([]string{"/bin/sh", "-c", `f=$0; exec <"$f"; rm -f "$f"; exec "$@"`, f}, cmd...)
	}
	max := spec.MaxOutput
	if max <= 0 {
		max = defaultMaxOutput
	}
	pidFile := boxproc.ExecDir + "/" + boxproc.RandomID()
	cmd = append([]string{"/bin/sh", "-c", boxproc.ExecWrapper, pidFile}, cmd...)
	s, pid, err := b.start(ctx, "exec", startRequest{Process: processConfig{Cmd: cmd[0], Args: cmd[1:], Envs: spec.Env, Cwd: spec.Dir}})
	if err != nil {
		return vendors.ExecResult{}, err
	}
	defer s.close()
	stop := context.AfterFunc(ctx, func() {
		s.close()
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = b.signalPID(kctx, pid, syscall.SIGKILL)
		b.killSession(kctx, pidFile)
	})
	defer stop()
	stdout, stderr := &boxproc.Capped{Max: max}, &boxproc.Capped{Max: max}
	for {
		ev, err := b.nextEvent(ctx, "exec", s)
		if err != nil {
			if ctx.Err() != nil {
				return vendors.ExecResult{}, fmt.Errorf("e2b: exec %s: %w", spec.Command[0], context.Cause(ctx))
			}
			return vendors.ExecResult{}, err
		}
		switch e := ev.Event; {
		case e.Data != nil:
			_, _ = stdout.Write(e.Data.Stdout)
			_, _ = stderr.Write(e.Data.Stderr)
		case e.End != nil:
			code := e.End.ExitCode
			if !e.End.Exited {
				if c, ok := signalCode(e.End.Status); ok {
					code = c
				}
			}
			return vendors.ExecResult{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
		}
	}
}

// killSession kills the session of a cancelled Exec (envd signals one
// process only).
func (b *Box) killSession(ctx context.Context, pidFile string) {
	kill := boxproc.KillSession(pidFile)
	s, _, err := b.start(ctx, "exec", startRequest{Process: processConfig{Cmd: kill[0], Args: kill[1:]}})
	if err != nil {
		return
	}
	defer s.close()
	for {
		ev, err := b.nextEvent(ctx, "exec", s)
		if err != nil || ev.Event.End != nil {
			return
		}
	}
}

// signalCode reads the status of a process a signal ended, as Go's
// os.ProcessState prints it ("signal: killed"), as 128+n.
func signalCode(status string) (int, bool) {
	name, ok := strings.CutPrefix(status, "signal: ")
	if !ok {
		return 0, false
	}
	for n := 1; n < 65; n++ {
		if syscall.Signal(n).String() == name {
			return 128 + n, true
		}
	}
	return 0, false
}

// Spawn starts a detached process under the supervisor and returns once
// it runs. Its environment travels in envd's start request only, which
// the control plane never shows (nor any command line), and ends up in
// the environment of the started process alone.
func (b *Box) Spawn(ctx context.Context, spec vendors.SpawnSpec) (vendors.Process, error) {
	name, err := boxproc.SpawnName(spec.Command, spec.Name)
	if err != nil {
		return nil, fmt.Errorf("e2b: spawn: %w", err)
	}
	if err := boxproc.CheckEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("e2b: spawn: %w", err)
	}
	dir := boxproc.Dir + "/" + name
	names := slices.Sorted(maps.Keys(spec.Env))
	args := append([]string{"-c", supervisor, boxproc.Supervisor, dir, strings.Join(names, " ")}, spec.Command...)
	s, _, err := b.start(ctx, "spawn", startRequest{Tag: name,
		Process: processConfig{Cmd: "/bin/sh", Args: args, Envs: spec.Env, Cwd: spec.Dir}})
	if err != nil {
		return nil, err
	}
	// Dropping the stream leaves the supervisor running: envd does not
	// tie a process to its caller's stream.
	defer s.close()
	out, errOut := &boxproc.Capped{Max: 64}, &boxproc.Capped{Max: 4096}
	for {
		ev, err := b.nextEvent(ctx, "spawn", s)
		if err != nil {
			return nil, err
		}
		switch e := ev.Event; {
		case e.Data != nil:
			_, _ = out.Write(e.Data.Stdout)
			_, _ = errOut.Write(e.Data.Stderr)
			if line, _, ok := strings.Cut(out.String(), "\n"); ok {
				pid, err := strconv.Atoi(strings.TrimSpace(line))
				if err != nil || pid <= 0 {
					return nil, fmt.Errorf("e2b: spawn %s: the supervisor printed %q", spec.Command[0], line)
				}
				return &Process{b: b, id: name, pid: pid}, nil
			}
		case e.End != nil:
			return nil, fmt.Errorf("e2b: spawn %s: supervisor exited %d: %s", spec.Command[0], e.End.ExitCode, strings.TrimSpace(errOut.String()))
		}
	}
}

// Process returns a process Spawn started, by name.
func (b *Box) Process(ctx context.Context, id string) (vendors.Process, error) {
	pid, err := boxproc.PID(ctx, "e2b", b.readFile, id)
	if err != nil {
		return nil, err
	}
	return &Process{b: b, id: id, pid: pid}, nil
}

// Process is a process started by Spawn.
type Process struct {
	b   *Box
	id  string
	pid int
}

var _ vendors.Process = (*Process)(nil)

// ID returns the process's name in the sandbox.
func (p *Process) ID() string { return p.id }

func (p *Process) dir() string { return boxproc.Dir + "/" + p.id }

// Output follows the process's stdout and stderr from their start until
// it ends (or ctx ends, or the readers are closed): a follower in the
// sandbox streams the output files through envd.
func (p *Process) Output(ctx context.Context) (io.ReadCloser, io.ReadCloser, error) {
	script := `tail -c +1 -s 0.2 --pid="$1" -F "$0/stdout" 2>/dev/null & o=$!
tail -c +1 -s 0.2 --pid="$1" -F "$0/stderr" >&2 2>/dev/null & e=$!
trap 'kill $o $e 2>/dev/null; exit 0' TERM
wait $o $e`
	s, pid, err := p.b.start(ctx, "output", startRequest{Process: processConfig{Cmd: "/bin/sh",
		Args: []string{"-c", script, p.dir(), strconv.Itoa(p.pid)}}})
	if err != nil {
		return nil, nil, err
	}
	stopped := make(chan struct{})
	stopFollower := sync.OnceFunc(func() {
		close(stopped)
		s.close()
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = p.b.signalPID(kctx, pid, syscall.SIGTERM)
	})
	stop := context.AfterFunc(ctx, stopFollower)
	stdout, stderr, outW, errW := boxproc.Pipes(func() { go stopFollower() })
	go func() {
		defer stop()
		var err error
		for {
			var ev processEvent
			ev, err = p.b.nextEvent(ctx, "output", s)
			if err != nil {
				select {
				case <-stopped:
					err = io.ErrClosedPipe
				default:
				}
				break
			}
			if d := ev.Event.Data; d != nil {
				if len(d.Stdout) > 0 {
					_, _ = outW.Write(d.Stdout)
				}
				if len(d.Stderr) > 0 {
					_, _ = errW.Write(d.Stderr)
				}
			}
			if ev.Event.End != nil {
				break
			}
		}
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		outW.CloseWithError(err)
		errW.CloseWithError(err)
		s.close()
	}()
	return stdout, stderr, nil
}

// Logs reads what the process printed so far from its output files.
func (p *Process) Logs(ctx context.Context) ([]byte, []byte, error) {
	return boxproc.Logs(ctx, Name, p.b.readFile, p.dir())
}

// Wait returns the process's exit status once it ended: at once from its
// exit file, else after following the supervisor's end through envd
// (Connect by the process's tag).
func (p *Process) Wait(ctx context.Context) (int, error) {
	for {
		if code, done, err := p.exited(ctx); err != nil || done {
			return code, err
		}
		s, err := p.b.stream(ctx, procConnect, connectRequest{Process: processSelector{Tag: p.id}})
		var ce *ConnectError
		switch {
		case errors.As(err, &ce) && ce.Code == "not_found":
			// envd no longer tracks the supervisor (it ended, or envd
			// restarted): the exit file is the record.
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return 0, fmt.Errorf("e2b: wait for %s: %w", p.id, err)
			}
			continue
		case err != nil:
			if ctx.Err() != nil {
				return 0, fmt.Errorf("e2b: wait for %s: %w", p.id, context.Cause(ctx))
			}
			return 0, err
		}
		err = p.followEnd(ctx, s)
		s.close()
		if err != nil {
			if ctx.Err() != nil {
				return 0, fmt.Errorf("e2b: wait for %s: %w", p.id, context.Cause(ctx))
			}
			if errors.As(err, &ce) && ce.Code == "not_found" {
				continue
			}
			return 0, err
		}
	}
}

// followEnd reads a Connect stream until the process's end.
func (p *Process) followEnd(ctx context.Context, s *streamReader) error {
	stop := context.AfterFunc(ctx, func() { s.close() })
	defer stop()
	for {
		ev, err := p.b.nextEvent(ctx, "wait", s)
		if err != nil {
			return err
		}
		if ev.Event.End != nil {
			return nil
		}
	}
}

// exited reads the exit file.
func (p *Process) exited(ctx context.Context) (int, bool, error) {
	raw, err := p.b.readFile(ctx, p.dir()+"/exit")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("e2b: wait for %s: %w", p.id, err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, false, fmt.Errorf("e2b: wait for %s: exit file holds %q", p.id, raw)
	}
	return code, true, nil
}

// Signal sends sig to the process; one that already ended is not an
// error.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) error {
	res, err := p.b.Exec(ctx, vendors.ExecSpec{Command: boxproc.Signal(int(sig), p.pid, p.dir())})
	if err != nil {
		return fmt.Errorf("e2b: signal %s: %w", p.id, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("e2b: signal %s: %s", p.id, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}
