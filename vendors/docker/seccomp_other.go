//go:build !linux

package docker

import "github.com/docker/docker/api/types/container"

// jailConfine leaves a box under the engine's default seccomp profile and
// path masks. The jail profile is Docker's default (moby/profiles) plus
// the calls bubblewrap needs, and that default, like Docker's default
// masked paths, is built on Linux only: from another system (boxctl on
// macOS) the bridge's jail does not run in the Docker boxes it creates.
func jailConfine(*container.HostConfig) error { return nil }
