package server

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// execCommand runs POST /v1/exec: a command to its end, as the harnesses'
// user from their environment plus the request's, its process group
// killed at its timeout or when the caller hangs up. The command runs
// outside the jail the operator's floor sets for turns: the bearer that
// may ask for it may drive the box whole.
func (s *Server) execCommand(w http.ResponseWriter, r *http.Request) {
	var req wire.ExecRequest
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	if err := req.Validate(); err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	if req.Dir != "" {
		// Checked here: a start in a missing directory names the program.
		if fi, err := os.Stat(req.Dir); err != nil || !fi.IsDir() {
			writeError(w, wire.TypeInvalidRequest, "dir "+req.Dir+": not a directory of the box")
			return
		}
	}
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	if timeout == 0 {
		timeout = wire.DefaultExecTimeoutMS * time.Millisecond
	}
	res, err := runCommand(r.Context(), s.opts.Engine.Environ(), req, timeout)
	if err != nil {
		var ee *exec.Error
		var pe *fs.PathError
		if errors.As(err, &ee) || errors.As(err, &pe) && (errors.Is(pe.Err, syscall.ENOENT) ||
			errors.Is(pe.Err, syscall.ENOTDIR) || errors.Is(pe.Err, syscall.EACCES)) {
			// No such program, or no such working directory.
			writeError(w, wire.TypeInvalidRequest, "command: "+err.Error())
			return
		}
		writeError(w, wire.TypeServerError, "command: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// runCommand runs req's command from environ with req's additions, to its
// end or timeout.
func runCommand(ctx context.Context, environ []string, req wire.ExecRequest, timeout time.Duration) (wire.ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, req.Command[0], req.Command[1:]...)
	cmd.Env = append([]string(nil), environ...)
	for k, v := range req.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = req.Dir
	if len(req.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	stdout, stderr := &capped{max: wire.ExecOutputLimit}, &capped{max: wire.ExecOutputLimit}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	inGroup(cmd)
	// Output a child of the command holds open must not hold the answer.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	res := wire.ExecResult{Stdout: stdout.b.Bytes(), Stderr: stderr.b.Bytes(), Truncated: stdout.over || stderr.over,
		DurationMS: time.Since(start).Milliseconds()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = commandExit(exit)
		// Ended by the kill of its deadline, not finished as it passed.
		res.TimedOut = res.ExitCode > 128 && errors.Is(ctx.Err(), context.DeadlineExceeded)
	case errors.Is(err, exec.ErrWaitDelay):
		res.ExitCode = cmd.ProcessState.ExitCode()
	default:
		return wire.ExecResult{}, err
	}
	return res, nil
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room < len(p) {
		c.over = true
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.b.Write(p)
}
