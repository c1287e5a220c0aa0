//go:build !linux

package exact

import "syscall"

// procAttr starts a process in a group of its own (no parent-death signal
// outside Linux).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
