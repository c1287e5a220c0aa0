// Package jail confines a harness process with bubblewrap (bwrap): the
// `execution` of a turn (kind host) asks for a file-system jail
// (jail.mode write-jail or fs-jail) and for a network jail (netJail.mode
// net-jail), and this package turns the turn's command into the bwrap
// command that enforces them.
//
// What each mode enforces (every jailed process also runs in fresh user,
// pid, ipc and uts namespaces with every capability dropped, as nobody
// when the bridge runs as root (a capability-less root inside would make
// a bwrap of the harness's own, such as Codex's sandbox, fail), and dies
// with the bridge; the engine starts it in a session of its own, so it
// cannot reach the bridge's terminal):
//
//   - write-jail: the host's file system is visible read-only; the harness
//     writes only in its project directory (the turn's cwd) and in its
//     session's private state directory. Its HOME, XDG directories and
//     TMPDIR are a writable root inside the project directory (jail.root,
//     default .agent-home, which ignores itself for git).
//   - fs-jail: as write-jail, but nothing of the host is visible except the
//     system paths a CLI needs (/usr, /bin, /sbin, /lib*, /etc, /opt), the
//     harness binary's own directories, a private /tmp, the project
//     directory and the session's state directory.
//   - In both, the bridge's data directory (its store, every other
//     session's state) is hidden behind an empty read-only tmpfs; only the
//     turn's own state directory is mounted inside it.
//   - net-jail: the harness runs in a network namespace of its own, where
//     only loopback exists. A relay (this package's RunRelay, run by the
//     bridge's own executable inside the jail) listens there on the model
//     endpoint's address and carries each connection over a Unix socket to
//     a forwarder in the bridge, which dials the model endpoint
//     (TANGLE_ROUTER_URL's host:port) and nothing else. The relay carries
//     bytes, not HTTP: TLS runs end to end between the harness and the
//     endpoint. A DNS-named endpoint resolves to loopback through a
//     generated /etc/hosts (no other name resolves: no DNS server is
//     reachable); an endpoint port below 1024 is served on port+10000 and
//     the harness is given that URL, since an unprivileged jail cannot bind
//     low ports. An https endpoint named by a non-loopback IP address
//     cannot be served (its certificate names that address), so net-jail
//     is unavailable then. The host's socket directories (/tmp, /run) are
//     hidden too, so a Unix socket of a host daemon is no way out.
//
// Exact processes (ExactCommand, for package exact) are confined harder
// than harnesses: every namespace unshared (--unshare-all: the network is
// loopback alone), the environment cleared to the launch's own
// (--clearenv), the system paths read-only and the exact environment's
// own directory as a private /tmp, nothing else of the host. Inside, the
// bridge's executable (LimitArg) sets the CPU affinity and the data and
// file size limits of the environment's resources, then executes the
// launch; ServeRelayIfAsked serves that too.
//
// The operator's floor (Floor, from BRIDGE_JAIL_MODE and
// BRIDGE_NET_JAIL_MODE as the TypeScript bridge reads them) raises every
// request: a turn runs in the more confined of its own jail mode and the
// floor's, and in the network jail when either asks for it. A request may
// raise the floor, never lower it.
//
// Availability is probed: New does not, the engine probes at start, and
// Check probes again on every jailed turn before it is admitted. A jail
// that cannot run (no bwrap, user namespaces refused) is an
// *UnavailableError and the turn is refused; it never runs unconfined.
//
// A Jailer is safe for concurrent use; a Prepared belongs to one turn (or
// one long-lived session process) and its Wrap's cleanup to the process
// it wrapped.
package jail
