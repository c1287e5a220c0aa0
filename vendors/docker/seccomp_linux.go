package docker

import "github.com/docker/docker/oci"

// defaultPaths are the masked and read-only paths of Docker's default
// Linux spec, the CPUs' thermal_throttle masks computed on this machine.
func defaultPaths() (masked, readonly []string) {
	s := oci.DefaultLinuxSpec()
	return s.Linux.MaskedPaths, s.Linux.ReadonlyPaths
}
