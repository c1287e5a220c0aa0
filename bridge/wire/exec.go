package wire

import (
	"errors"
	"fmt"
	"strings"
)

// Limits of POST /v1/exec.
const (
	// DefaultExecTimeoutMS is a command's deadline when the request names
	// none; MaxExecTimeoutMS the longest it may name.
	DefaultExecTimeoutMS = 60_000
	MaxExecTimeoutMS     = 600_000
	// ExecOutputLimit is how much of each of stdout and stderr an answer
	// carries; the rest is counted and dropped (ExecResult.Truncated).
	ExecOutputLimit = 1 << 20
)

// ExecRequest is POST /v1/exec: one command run to its end in the box, as
// the user the harnesses run as, from their environment (the bridge's own
// configuration never among it), with Env added. Not a shell: Command is
// the argument vector.
type ExecRequest struct {
	Command []string `json:"command" jsonschema:"minItems=1"`
	// Env is added to the command's environment.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory (absolute); default the bridge's.
	Dir string `json:"dir,omitempty"`
	// Stdin is written to the command's standard input, then closed.
	Stdin []byte `json:"stdin,omitempty"`
	// TimeoutMS ends the command (its whole process group) when it runs
	// longer; default DefaultExecTimeoutMS.
	TimeoutMS int64 `json:"timeoutMs,omitempty" jsonschema:"minimum=0"`
}

// Validate checks the request.
func (r *ExecRequest) Validate() error {
	var errs []error
	if len(r.Command) == 0 || r.Command[0] == "" {
		errs = append(errs, errors.New("command: want the argument vector, its first element the program"))
	}
	if r.Dir != "" && !strings.HasPrefix(r.Dir, "/") {
		errs = append(errs, fmt.Errorf("dir %q: want an absolute path", r.Dir))
	}
	for k := range r.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			errs = append(errs, fmt.Errorf("env %q: not a variable name", k))
		}
	}
	if r.TimeoutMS < 0 || r.TimeoutMS > MaxExecTimeoutMS {
		errs = append(errs, fmt.Errorf("timeoutMs %d: want 0 to %d", r.TimeoutMS, MaxExecTimeoutMS))
	}
	return errors.Join(errs...)
}

// ExecResult is POST /v1/exec's answer once the command ended.
type ExecResult struct {
	// ExitCode is the command's exit status; 128 plus the signal for a
	// command ended by one (the timeout's SIGKILL among them).
	ExitCode int `json:"exitCode"`
	// Stdout and Stderr are the command's output, up to ExecOutputLimit
	// bytes each.
	Stdout []byte `json:"stdout"`
	Stderr []byte `json:"stderr"`
	// Truncated reports output beyond the limit, dropped.
	Truncated bool `json:"truncated,omitempty"`
	// TimedOut reports a command ended by its timeout.
	TimedOut bool `json:"timedOut,omitempty"`
	// DurationMS is how long the command ran.
	DurationMS int64 `json:"durationMs"`
}
