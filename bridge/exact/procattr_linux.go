package exact

import "syscall"

// procAttr starts a process in a group of its own, killed when the
// bridge's thread that started it dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
