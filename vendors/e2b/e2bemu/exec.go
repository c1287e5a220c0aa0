package e2bemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// The processes of envd, as Docker execs in the sandbox's container: as
// the OS user asked for, with stdin when asked, and on a pseudo-terminal
// of the asked size for a pty.

// execSpec is one process to start.
type execSpec struct {
	cmd  []string
	env  map[string]string
	dir  string
	user string
	// stdin keeps the process's standard input open for SendInput.
	stdin bool
	// pty, when set, runs the process on a terminal of this size.
	pty *ptySize
}

// ptySize is PTY.Size.
type ptySize struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

// execProc is a running exec.
type execProc struct {
	sb      *sandbox
	id      string
	pidFile string
	tty     bool
	stdin   bool
	user    string
	att     types.HijackedResponse

	inMu     sync.Mutex
	inClosed bool
}

// pidWrapper records the process's pid (the shell's, which exec keeps) in
// the file $0, then becomes the command.
const pidWrapper = `echo $$ >"$0" && exec "$@"`

func (s *Server) execStart(ctx context.Context, sb *sandbox, spec execSpec) (*execProc, error) {
	pidFile := "/tmp/.envd-" + randomString(12, lowerDigits) + ".pid"
	opts := container.ExecOptions{User: spec.user, WorkingDir: spec.dir, AttachStdout: true, AttachStderr: true,
		AttachStdin: spec.stdin || spec.pty != nil, Tty: spec.pty != nil,
		Cmd: append([]string{"/bin/sh", "-c", pidWrapper, pidFile}, spec.cmd...)}
	for k, v := range spec.env {
		opts.Env = append(opts.Env, k+"="+v)
	}
	if spec.pty != nil {
		opts.ConsoleSize = &[2]uint{uint(spec.pty.Rows), uint(spec.pty.Cols)}
	}
	created, err := s.cli.ContainerExecCreate(ctx, sb.box.ID(), opts)
	if err != nil {
		return nil, err
	}
	att, err := s.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: spec.pty != nil, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return nil, err
	}
	if spec.pty != nil {
		// The size asked for at the start, for engines that do not take it
		// with the exec.
		_ = s.cli.ContainerExecResize(ctx, created.ID, container.ResizeOptions{Height: uint(spec.pty.Rows), Width: uint(spec.pty.Cols)})
	}
	return &execProc{sb: sb, id: created.ID, pidFile: pidFile, tty: spec.pty != nil, stdin: spec.stdin, user: spec.user, att: att}, nil
}

// output copies the process's output to stdout and stderr (a terminal's
// all to stdout) until it ends.
func (p *execProc) output(stdout, stderr io.Writer) error {
	if p.tty {
		_, err := io.Copy(stdout, p.att.Reader)
		return err
	}
	_, err := stdcopy.StdCopy(stdout, stderr, p.att.Reader)
	return err
}

// wait returns the exit code once the exec has ended.
func (s *Server) execWait(ctx context.Context, p *execProc) (int, error) {
	defer p.att.Close()
	for {
		ins, err := s.cli.ContainerExecInspect(ctx, p.id)
		if err != nil {
			return 0, err
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// errStdinClosed is a write to a process whose stdin was closed.
var errStdinClosed = errors.New("stdin is closed")

// write sends input to the process.
func (p *execProc) write(b []byte) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.inClosed {
		return errStdinClosed
	}
	_, err := p.att.Conn.Write(b)
	return err
}

// closeStdin ends the process's input.
func (p *execProc) closeStdin() error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.inClosed {
		return nil
	}
	p.inClosed = true
	return p.att.CloseWrite()
}

// signal sends sig (a name kill(1) knows: TERM, KILL) to the process, as
// its own user: the sandbox's root may lack CAP_KILL.
// A signal sent right after the start waits (up to 5 s, in the box) for the
// process's pid file, which its wrapper writes once it runs.
func (s *Server) execSignal(ctx context.Context, p *execProc, sig string) error {
	res, err := s.runAs(ctx, p.sb, p.user, nil, "sh", "-c", `i=0; while [ ! -s "$0" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; p=$(cat "$0") && kill -s "$1" "$p"`, p.pidFile, sig)
	if err != nil {
		return err
	}
	if res.code != 0 {
		return fmt.Errorf("kill: %s", strings.TrimSpace(string(res.stderr)))
	}
	return nil
}

// resize sets the size of the process's terminal.
func (s *Server) execResize(ctx context.Context, p *execProc, size ptySize) error {
	return s.cli.ContainerExecResize(ctx, p.id, container.ResizeOptions{Height: uint(size.Rows), Width: uint(size.Cols)})
}

// runResult is what a command run to completion printed.
type runResult struct {
	code           int
	stdout, stderr []byte
}

// runAs runs a command to completion as user, with stdin when not nil.
func (s *Server) runAs(ctx context.Context, sb *sandbox, user string, stdin []byte, cmd ...string) (runResult, error) {
	opts := container.ExecOptions{User: user, Cmd: cmd, AttachStdout: true, AttachStderr: true, AttachStdin: stdin != nil}
	created, err := s.cli.ContainerExecCreate(ctx, sb.box.ID(), opts)
	if err != nil {
		return runResult{}, err
	}
	att, err := s.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return runResult{}, err
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, func() { att.Close() })
	defer stop()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(att.Conn, bytes.NewReader(stdin))
			_ = att.CloseWrite()
		}()
	}
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		return runResult{}, err
	}
	ins, err := s.cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return runResult{}, err
	}
	return runResult{code: ins.ExitCode, stdout: stdout.Bytes(), stderr: stderr.Bytes()}, nil
}

// errNoUser is a user the sandbox does not have.
var errNoUser = errors.New("user not found")

// userHome returns the home directory of a user of the sandbox.
func (s *Server) userHome(ctx context.Context, sb *sandbox, user string) (string, error) {
	sb.homesMu.Lock()
	home, ok := sb.homes[user]
	sb.homesMu.Unlock()
	if ok {
		return home, nil
	}
	res, err := s.runAs(ctx, sb, "root", nil, "getent", "passwd", user)
	if err != nil {
		return "", err
	}
	fields := strings.Split(strings.TrimSpace(string(res.stdout)), ":")
	if res.code != 0 || len(fields) < 6 {
		return "", fmt.Errorf("%w: %q", errNoUser, user)
	}
	home = fields[5]
	sb.homesMu.Lock()
	sb.homes[user] = home
	sb.homesMu.Unlock()
	return home, nil
}

// defaultUser is the image's user, as envd runs what asks for none.
func (s *Server) defaultUser(ctx context.Context, containerID string) string {
	c, err := s.cli.ContainerInspect(ctx, containerID)
	if err != nil || c.Config == nil || c.Config.User == "" {
		return "root"
	}
	u, _, _ := strings.Cut(c.Config.User, ":")
	return u
}
