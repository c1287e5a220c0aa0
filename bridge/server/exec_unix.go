//go:build unix

package server

import (
	"os/exec"
	"syscall"
)

// inGroup starts cmd in a session (and process group) of its own, with no
// controlling terminal to push input into, killed whole when its context
// ends.
func inGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// commandExit is an ended command's status: 128 plus the signal that ended
// it, if one did.
func commandExit(e *exec.ExitError) int {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return e.ExitCode()
}
