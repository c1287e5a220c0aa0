// Package exact keeps exact process environments: keyed environments with
// no agent process in them, where a caller writes and reads files and runs
// shell-free processes, each confined by bubblewrap (package jail,
// Jailer.ExactCommand: every namespace unshared, the network down to
// loopback, the environment cleared to the launch's own, the box's system
// paths read-only and the environment's own directory as its private
// /tmp). It is the bridge's side of the TypeScript AgentExactProcessProvider
// contract (the routes under /v1/exact/environments).
//
// Durability: environments and processes are rows of the bridge's store
// (store.ExactEnvironment, store.ExactProcess) and their files and output
// live under Options.Dir, so all of it outlives a restart. A process the
// previous incarnation left running died with it (bubblewrap's
// --die-with-parent; Start also kills, through package leftover, what
// still carries the process's marker, and its process group) and is
// recorded ended by SIGKILL. An
// environment lives until it is destroyed or its maxLifetimeMs ends, when
// its processes are killed and its directory removed; a destroyed
// environment's key stays bound to its request.
//
// A Manager is safe for concurrent use. It owns the processes it started
// and their output copies: Close kills them and waits for them.
package exact
