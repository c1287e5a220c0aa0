//go:build !linux

package docker

// defaultPaths are Docker's default masked paths outside /proc: its oci
// package builds on Linux and Windows only, and what it masks under /proc
// a box unmasks anyway (jailPaths). No CPU has a thermal_throttle here.
func defaultPaths() (masked, readonly []string) { return maskedOutsideProc, nil }
