// Package docker is the Docker Engine vendor, boxctl's embedded default: a
// box is a container on the local (or DOCKER_HOST) engine, driven through
// the Engine API with the official Go client, never the docker binary.
//
// # Boxes
//
// Every box is hardened by default: it runs as the image's (non-root)
// user with no-new-privileges and every capability dropped, under a pids
// limit and the CPU and memory limits asked for (defaults: DefaultCPUs,
// DefaultMemory, DefaultPids), optionally under another OCI runtime (for
// example gVisor's runsc). Boxes share one Docker bridge network of
// boxctl's own (DefaultNetwork) on which containers cannot reach each
// other (inter-container traffic is off); the host reaches a box only
// through the ports it exposes, published on 127.0.0.1 on ephemeral host
// ports, or (WithDirectPorts) at the box's address on that network.
//
// # Jails in boxes
//
// The bridge's jails (write-jail, fs-jail, net-jail: bubblewrap, see
// bridge/jail) work in Docker boxes by default. Docker's default seccomp
// profile refuses what bubblewrap does as an unprivileged user (create a
// user namespace and, owned by it, mount, pid and network namespaces;
// mount and pivot its root inside them), and its masks of paths inside
// /proc make the kernel refuse the jail's own /proc. So every box runs
// under Docker's default profile (github.com/moby/profiles/seccomp) plus
// exactly these rules, never unconfined: clone and unshare when they
// create a user namespace, and mount, pivot_root and umount2; the rest of
// what Docker keeps for CAP_SYS_ADMIN (setns, clone3, the new mount API,
// bpf, ...) stays denied. Docker's masked and read-only paths outside
// /proc stay; those inside it are left to the kernel's own permission
// checks, which a box's capability-less user does not pass. The box
// still holds no capability and runs with no-new-privileges (bubblewrap
// needs no setuid bit), and the kernel checks every call against
// namespaces the box's process created. The host must allow unprivileged
// user namespaces (user.max_user_namespaces above 0; on kernels that
// have it, kernel.unprivileged_userns_clone=1); an engine that confines
// containers with AppArmor's docker-default profile denies mount outright,
// and jails are then unavailable in its boxes. A bridge that cannot jail
// refuses jailed turns; it never runs them unconfined. WithoutJails keeps
// Docker's stock profile and masks.
//
// # gVisor
//
// A box asked for vendors.RuntimeGVisor (WithRuntime, or CreateSpec.Runtime)
// runs under the engine's runsc runtime (WithGVisorRuntime names it;
// default "runsc"): its processes talk to gVisor's kernel, not the host's,
// with the same hardening as a runc box. Create refuses a runtime the
// engine lacks with a SpecError naming the ones it has, and a suspendable
// box under a runsc that keeps the box's files in its own overlay (any
// runtimeArgs without --overlay2=none), which a stop discards. Bubblewrap's
// filesystem jails hold under gVisor; a network namespace of its own does
// not come up there (google/gvisor#13438), so the bridge reports net-jail
// and exact process environments unavailable and refuses them. A start
// that fails under runsc can leave its shim, sandbox and gofer running
// after the engine forgot the container: Create ends them when its start
// fails, and Sweep (which gc's reaper calls) finds and ends any others.
//
// The lifetime is enforced inside the box: the vendor sets BOX_DEADLINE,
// the image's init ends every process in the box at that time, and the
// container is created with auto-remove, so the engine removes it when its
// init ends. A caller that crashed cannot leak a box past its deadline.
//
// # Processes and files
//
// Exec runs through the exec API, each command in a session of its own
// that a cancelled Exec kills. Its environment travels in the exec's
// create request only: the container's inspect data does not show it.
// Spawn, Read and Write are the process layer's (vendors/boxproc) over
// that exec: a spawned process's environment travels on a supervisor's
// stdin, so no exec's inspect data shows it either; the supervisor
// detaches from the exec and records the process's pid, output and exit
// status in the box under ProcDir, so it outlives the caller's connection
// and `boxctl logs` can read its output later. Read and Write move tar
// streams through an exec, as the box user, so a written file is that
// user's.
package docker
