//go:build !unix

package server

import "os/exec"

func inGroup(*exec.Cmd) {}

func commandExit(e *exec.ExitError) int { return e.ExitCode() }
