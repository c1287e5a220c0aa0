package main

import "golang.org/x/sys/unix"

// protectSecrets makes the bridge process non-dumpable: its /proc entries
// (environ, mem, fds) then belong to root, so another process of the box's
// user (the agent's harness, or a command it runs) cannot read the bearer
// and the router key from the bridge's environment. Processes the bridge
// starts are dumpable again after their exec, and never get the bearer.
func protectSecrets() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
