package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxproc"
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
	sendSignalRequest struct {
		Process processSelector `json:"process"`
		Signal  string          `json:"signal"`
	}
	sendInputRequest struct {
		Process processSelector `json:"process"`
		Input   struct {
			Stdin []byte `json:"stdin"`
		} `json:"input"`
	}
	closeStdinRequest struct {
		Process processSelector `json:"process"`
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
	procSendSignal = "/process.Process/SendSignal"
	procSendInput  = "/process.Process/SendInput"
	procCloseStdin = "/process.Process/CloseStdin"
)

// inputChunk bounds the input one SendInput carries.
const inputChunk = 64 << 10

// Process is a process started by Spawn.
type Process = boxproc.Process

// procLayer is the box's Spawn and Process (vendors.Procs, whose Read and
// Write the box's own, over envd's filesystem service, hide), embedded
// under a name of the package's own.
type procLayer = vendors.Procs

// withProcs gives b its process methods over envd's process service, each
// command a process envd starts, whose session a cancelled context kills,
// and returns b. A spawned process's environment travels on a
// supervisor's stdin through envd's SendInput, so it is in no command line
// and nothing the control plane shows.
func (b *Box) withProcs() *Box {
	b.procLayer = vendors.NewProcs(Name, func(ctx context.Context, c boxproc.Command) (int, error) {
		return b.run(ctx, c.Op, c.Argv, nil, "", c.Stdin, c.Stdout, c.Stderr)
	})
	return b
}

// start starts a process through envd, its stdin open when stdin, and
// returns its stream after the start event, with envd's pid of it.
func (b *Box) start(ctx context.Context, op string, req startRequest, stdin bool) (*streamReader, uint32, error) {
	req.Stdin = &stdin
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

// sendInput writes in to the standard input of the process pid envd
// started (SendInput), then closes it (CloseStdin), which it does even
// when a write failed, so the process never waits on an input that stopped.
func (b *Box) sendInput(ctx context.Context, pid uint32, in io.Reader) error {
	buf := make([]byte, inputChunk)
	var werr error
	for werr == nil {
		n, err := in.Read(buf)
		if n > 0 {
			var req sendInputRequest
			req.Process.PID = pid
			req.Input.Stdin = buf[:n]
			werr = b.unary(ctx, procSendInput, req, &struct{}{})
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && werr == nil {
			werr = err
		}
	}
	return errors.Join(werr, b.unary(ctx, procCloseStdin, closeStdinRequest{Process: processSelector{PID: pid}}, &struct{}{}))
}

// Exec runs a command to completion through envd. If ctx ends first, the
// command is killed in the sandbox (envd keeps a process whose stream was
// dropped running).
func (b *Box) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	return vendors.StreamExec(ctx, Name, spec, func(ctx context.Context, stdout, stderr io.Writer) (int, error) {
		if err := boxproc.CheckEnv(spec.Env); err != nil {
			return 0, fmt.Errorf("e2b: exec: %w", err)
		}
		return b.run(ctx, "exec", spec.Command, spec.Env, spec.Dir, spec.Stdin, stdout, stderr)
	})
}

// run runs cmd through envd with env (in the start request, which the
// control plane never shows) and dir, feeds it stdin (nil: none) through
// SendInput, copies its output to stdout and stderr (nil: discarded) as it
// comes, and returns its exit status. The command runs in a session of
// its own (boxproc.ExecWrapper), which a cancelled ctx kills: envd
// signals one process only.
func (b *Box) run(ctx context.Context, op string, cmd []string, env map[string]string, dir string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	pidFile := boxproc.ExecDir + "/" + boxproc.RandomID()
	wrapped := append([]string{"/bin/sh", "-c", boxproc.ExecWrapper, pidFile}, cmd...)
	s, pid, err := b.start(ctx, op, startRequest{Process: processConfig{Cmd: wrapped[0], Args: wrapped[1:], Envs: env, Cwd: dir}}, stdin != nil)
	if err != nil {
		return 0, err
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
	if stdin != nil {
		go func() { _ = b.sendInput(ctx, pid, stdin) }()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	for {
		ev, err := b.nextEvent(ctx, op, s)
		if err != nil {
			if ctx.Err() != nil {
				return 0, fmt.Errorf("e2b: %s %s: %w", op, cmd[0], context.Cause(ctx))
			}
			return 0, err
		}
		switch e := ev.Event; {
		case e.Data != nil:
			if _, err := stdout.Write(e.Data.Stdout); err != nil {
				return 0, fmt.Errorf("e2b: %s %s: %w", op, cmd[0], err)
			}
			if _, err := stderr.Write(e.Data.Stderr); err != nil {
				return 0, fmt.Errorf("e2b: %s %s: %w", op, cmd[0], err)
			}
		case e.End != nil:
			code := e.End.ExitCode
			if !e.End.Exited {
				if c, ok := signalCode(e.End.Status); ok {
					code = c
				}
			}
			return code, nil
		}
	}
}

// killSession kills the session of a cancelled command (envd signals one
// process only).
func (b *Box) killSession(ctx context.Context, pidFile string) {
	kill := boxproc.KillSession(pidFile)
	s, _, err := b.start(ctx, "exec", startRequest{Process: processConfig{Cmd: kill[0], Args: kill[1:]}}, false)
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
