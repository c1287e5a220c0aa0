//go:build linux

package docker

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/oci"
	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// jailRules are the rules a box's seccomp profile adds to Docker's
// default profile (seccomp.DefaultProfile), after its own rules, so that
// bubblewrap, the bridge's jail, can build its sandbox as the box's
// unprivileged user. Docker's default allows these calls only to a
// container holding CAP_SYS_ADMIN (its rule naming clone, unshare, mount,
// umount2 among others "includes" that capability; pivot_root it never
// allows), and a box holds no capability. Each added rule is needed (a
// bwrap run without it fails, as noted) and none reaches beyond
// namespaces the box's own process creates: the kernel checks every call
// against the caller's user namespace, so they grant nothing over the
// host or the rest of the box.
//
//   - clone with CLONE_NEWUSER set (argument 0; argument 1 on s390):
//     bwrap creates its user namespace and, owned by it, the mount, pid,
//     ipc, uts, cgroup and (net-jail) network namespaces in one clone.
//     Docker's default allows clone only without any namespace flag
//     ("No permissions to create new namespace" otherwise). A namespace
//     flag without CLONE_NEWUSER stays denied.
//   - unshare with CLONE_NEWUSER set: once its mounts are made, bwrap
//     enters a second user namespace to map the jailed process to its
//     final uid ("unshare user ns: Operation not permitted").
//   - mount: bwrap makes the box's root a slave of the jail's ("Failed to
//     make / slave"), bind-mounts the paths a jail shows, mounts its
//     /proc, /dev and tmpfs directories and remounts binds read-only, all
//     in its own mount namespace.
//   - pivot_root: bwrap makes its new tree the jail's root (runc pivots
//     before the filter applies, which is why Docker's default has no
//     rule for it).
//   - umount2: bwrap detaches the box's old root from the jail ("unmount
//     old root").
//
// Everything else Docker's default gates behind CAP_SYS_ADMIN stays
// denied: setns (a jail joins no existing namespace), clone3 (still
// ENOSYS, so the C library falls back to clone, whose flags a filter can
// see), the new mount API (fsopen, fsconfig, fsmount, fspick, move_mount,
// open_tree, mount_setattr), umount, sethostname, setdomainname, bpf,
// perf_event_open, fanotify_init, quotactl, quotactl_fd, syslog,
// lookup_dcookie and the lsm_* calls.
var jailRules = []*seccomp.Syscall{
	{
		LinuxSyscall: specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow, Args: withNewUser(0)},
		Comment:      "boxctl jail: clone creating a user namespace (and namespaces it owns), for bubblewrap",
		Excludes:     &seccomp.Filter{Arches: []string{"s390", "s390x"}},
	},
	{
		LinuxSyscall: specs.LinuxSyscall{Names: []string{"clone"}, Action: specs.ActAllow, Args: withNewUser(1)},
		Comment:      "boxctl jail: clone creating a user namespace, for bubblewrap (s390 orders clone's arguments differently)",
		Includes:     &seccomp.Filter{Arches: []string{"s390", "s390x"}},
	},
	{
		LinuxSyscall: specs.LinuxSyscall{Names: []string{"unshare"}, Action: specs.ActAllow, Args: withNewUser(0)},
		Comment:      "boxctl jail: unshare creating a user namespace, for bubblewrap's uid mapping",
	},
	{
		LinuxSyscall: specs.LinuxSyscall{Names: []string{"mount", "pivot_root", "umount2"}, Action: specs.ActAllow},
		Comment:      "boxctl jail: bubblewrap's mounts and root pivot, inside the mount namespace it owns",
	},
}

// withNewUser matches a flags argument (at index i) that has CLONE_NEWUSER
// set.
func withNewUser(i uint) []specs.LinuxSeccompArg {
	return []specs.LinuxSeccompArg{{Index: i, Value: unix.CLONE_NEWUSER, ValueTwo: unix.CLONE_NEWUSER, Op: specs.OpMaskedEqual}}
}

// jailProfile returns Docker's default seccomp profile with jailRules
// added after its own rules.
func jailProfile() *seccomp.Seccomp {
	p := seccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, jailRules...)
	return p
}

// jailSeccomp is the SecurityOpt entry of a box's seccomp profile,
// rendered once.
var jailSeccomp = sync.OnceValues(func() (string, error) {
	b, err := json.Marshal(jailProfile())
	if err != nil {
		return "", fmt.Errorf("docker: seccomp profile of boxes: %w", err)
	}
	return "seccomp=" + string(b), nil
})

// jailPaths returns Docker's default masked and read-only paths
// (oci.DefaultLinuxSpec) without those under /proc. The kernel lets a
// process in a user namespace mount a fresh proc (bwrap's --proc: the
// jail sees only its own processes) only when the proc it already sees is
// fully visible, with no path inside it masked or made read-only by a
// mount it cannot undo; any one of Docker's /proc masks makes that mount
// fail with EPERM ("Can't mount proc on /newroot/proc"). Unmasked,
// those paths stay behind the kernel's own checks: the box's user holds
// no capability, /proc/kcore, /proc/timer_list and /proc/sysrq-trigger
// are root's alone, and the files of /proc/sys, /proc/irq, /proc/bus and
// /proc/fs are writable by the host's root only (a jail's user-namespace
// root is no root to them, but for the network settings of the jail's own
// network namespace). What a box's processes gain is mainly reading
// /proc/interrupts (per-CPU interrupt counts of the host), /proc/asound,
// /proc/acpi and /proc/scsi, and their own keys in /proc/keys. The masks
// outside /proc (/sys/firmware, /sys/devices/virtual/powercap, the CPUs'
// thermal_throttle) stay.
func jailPaths() (masked, readonly []string) {
	s := oci.DefaultLinuxSpec()
	underProc := func(p string) bool { return p == "/proc" || strings.HasPrefix(p, "/proc/") }
	// Non-nil even when empty: a nil list means the engine's defaults.
	masked = slices.DeleteFunc(append([]string{}, s.Linux.MaskedPaths...), underProc)
	readonly = slices.DeleteFunc(append([]string{}, s.Linux.ReadonlyPaths...), underProc)
	return masked, readonly
}

// jailConfine sets what lets bubblewrap run in a box: the jail seccomp
// profile and Docker's system path masks outside /proc.
func jailConfine(host *container.HostConfig) error {
	opt, err := jailSeccomp()
	if err != nil {
		return err
	}
	host.SecurityOpt = append(host.SecurityOpt, opt)
	host.MaskedPaths, host.ReadonlyPaths = jailPaths()
	return nil
}
