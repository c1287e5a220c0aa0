package daytona

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// boxDir is where the box keeps what this package's commands leave
// (ExecDir, ProcDir).
const boxDir = "/tmp/.boxctl"

// ExecDir holds, while an Exec runs, its process group id and its
// captured input and output.
const ExecDir = boxDir + "/exec"

// maxStdin caps what an Exec sends to its command's standard input: it
// travels inside the command text.
const maxStdin = 64 << 20

// executeRequest is POST /process/execute's body (ExecuteRequest).
type executeRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	Timeout int               `json:"timeout,omitempty"`
}

// executeResponse is ExecuteResponse.
type executeResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// Exec runs a command to completion through the toolbox's
// /process/execute. That route answers stdout and stderr as one text, and
// has no standard input, so the command runs inside a small script: its
// input comes from a file the script writes first, its stdout and stderr
// go to files, and the script answers its exit status and both files
// base64-encoded after a marker. Env travels in the request's envs, never
// in the command text. If ctx ends first, the command's process group is
// killed in the box.
func (b *Box) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	if len(spec.Command) == 0 {
		return vendors.ExecResult{}, errors.New("daytona: exec: empty command")
	}
	max := spec.OutputCap()
	id := boxproc.RandomID()
	var stdin []byte
	if spec.Stdin != nil {
		var err error
		if stdin, err = io.ReadAll(io.LimitReader(spec.Stdin, maxStdin+1)); err != nil {
			return vendors.ExecResult{}, fmt.Errorf("daytona: exec %s: read stdin: %w", spec.Command[0], err)
		}
		if len(stdin) > maxStdin {
			return vendors.ExecResult{}, fmt.Errorf("daytona: exec %s: stdin is over %d bytes", spec.Command[0], maxStdin)
		}
	}
	timeout, byCtx := b.timeout(ctx)
	req := executeRequest{Command: execScript(id, spec.Command, stdin, spec.Stdin != nil, max), Cwd: spec.Dir, Envs: spec.Env,
		Timeout: timeout}
	stop := context.AfterFunc(ctx, func() { b.killExec(context.WithoutCancel(ctx), id) })
	defer stop()
	var res executeResponse
	err := b.send(ctx, "exec", vendorhttp.Call{Method: http.MethodPost, Path: "/process/execute", Body: req, Out: &res})
	if status(err) == http.StatusRequestTimeout && byCtx {
		// The toolbox's timeout is ctx's deadline rounded up to a second,
		// so ctx ends about now, if it has not already.
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	if ctx.Err() != nil {
		return vendors.ExecResult{}, fmt.Errorf("daytona: exec %s: %w", spec.Command[0], context.Cause(ctx))
	}
	if err != nil {
		if status(err) == http.StatusRequestTimeout {
			return vendors.ExecResult{}, fmt.Errorf("daytona: exec %s: ran past the box's deadline: %w", spec.Command[0], err)
		}
		return vendors.ExecResult{}, fmt.Errorf("daytona: exec %s: %w", spec.Command[0], err)
	}
	out, err := parseExec(id, res)
	if err != nil {
		return vendors.ExecResult{}, fmt.Errorf("daytona: exec %s: %w", spec.Command[0], err)
	}
	return out, nil
}

// timeout is the execute timeout in whole seconds, rounded up: until ctx's
// deadline or the box's, whichever is first (byCtx reports ctx's); 0
// (none) when neither is set.
func (b *Box) timeout(ctx context.Context) (secs int, byCtx bool) {
	end, byCtx := ctx.Deadline()
	if !b.deadline.IsZero() && (!byCtx || b.deadline.Before(end)) {
		end, byCtx = b.deadline, false
	} else if !byCtx {
		return 0, false
	}
	return max(1, int(math.Ceil(time.Until(end).Seconds()))), byCtx
}

// execMarker starts the script's answer, after which nothing of the
// command's own output can appear (it went to files).
func execMarker(id string) string { return "BOXCTL-EXEC-" + id + " " }

// execScript is the text /process/execute runs with the toolbox's shell
// (bash, zsh or sh: it is POSIX shell). $$ is that shell, which the
// toolbox starts as the leader of a process group of its own.
func execScript(id string, cmd []string, stdin []byte, hasStdin bool, max int64) string {
	d := ExecDir + "/" + id
	var s strings.Builder
	fmt.Fprintf(&s, "d=%s\nmkdir -p \"$d\" && echo $$ >\"$d/pid\" || exit 126\n", shellQuote(d))
	switch {
	case len(stdin) > 0:
		fmt.Fprintf(&s, "printf %%s %s | base64 -d >\"$d/in\"\n", shellQuote(base64.StdEncoding.EncodeToString(stdin)))
	case hasStdin:
		s.WriteString(": >\"$d/in\"\n")
	}
	in := "/dev/null"
	if hasStdin {
		in = "\"$d/in\""
	}
	fmt.Fprintf(&s, "( exec %s ) <%s >\"$d/out\" 2>\"$d/err\"\ns=$?\n", shellJoin(cmd), in)
	fmt.Fprintf(&s, "printf '\\n%%s%%d\\n' %s \"$s\"\n", shellQuote(execMarker(id)))
	fmt.Fprintf(&s, "head -c %d \"$d/out\" | base64 | tr -d '\\n'; printf '\\n'\n", max)
	fmt.Fprintf(&s, "head -c %d \"$d/err\" | base64 | tr -d '\\n'; printf '\\n'\n", max)
	s.WriteString("rm -rf \"$d\"\n")
	return s.String()
}

// parseExec reads execScript's answer.
func parseExec(id string, res executeResponse) (vendors.ExecResult, error) {
	marker := execMarker(id)
	i := strings.LastIndex(res.Result, marker)
	if i < 0 {
		msg := strings.TrimSpace(res.Result)
		if len(msg) > 2000 {
			msg = msg[:2000] + "..."
		}
		return vendors.ExecResult{}, fmt.Errorf("the command did not start (exit %d): %s", res.ExitCode, msg)
	}
	lines := strings.SplitN(res.Result[i+len(marker):], "\n", 4)
	if len(lines) < 3 {
		return vendors.ExecResult{}, errors.New("the answer of the command is cut short")
	}
	code, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		return vendors.ExecResult{}, fmt.Errorf("the command's exit status %q", lines[0])
	}
	stdout, err := base64.StdEncoding.DecodeString(strings.TrimSpace(lines[1]))
	if err != nil {
		return vendors.ExecResult{}, fmt.Errorf("decode stdout: %w", err)
	}
	stderr, err := base64.StdEncoding.DecodeString(strings.TrimSpace(lines[2]))
	if err != nil {
		return vendors.ExecResult{}, fmt.Errorf("decode stderr: %w", err)
	}
	return vendors.ExecResult{ExitCode: code, Stdout: stdout, Stderr: stderr}, nil
}

// killExec kills the process group of the Exec id, waiting a moment for
// its pid file if the script has not written it yet.
func (b *Box) killExec(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	script := fmt.Sprintf(`f=%s; i=0; while [ ! -s "$f" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done
p=$(cat "$f" 2>/dev/null) && kill -9 -- "-$p" 2>/dev/null; rm -rf %s; exit 0`,
		shellQuote(ExecDir+"/"+id+"/pid"), shellQuote(ExecDir+"/"+id))
	_ = b.send(ctx, "exec", vendorhttp.Call{Method: http.MethodPost, Path: "/process/execute",
		Body: executeRequest{Command: script, Timeout: 15}, Out: &executeResponse{}})
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
	}
	return b.String()
}
