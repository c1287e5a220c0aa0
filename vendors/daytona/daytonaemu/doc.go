// Package daytonaemu is a local emulator of Daytona: its control plane
// (https://app.daytona.io/api), its toolbox (the daemon in every sandbox,
// reached through the proxy at {toolboxProxyUrl}/{sandboxId}), its
// preview proxy and its events channel (the Socket.IO gateway at
// /api/socket.io/), answering as the API documents the official SDK
// bundles (@daytona/api-client and @daytona/toolbox-api-client 0.218.0)
// say: paths, status codes, field names, error bodies, states. A real
// container on the local Docker engine is behind every sandbox. `boxctl
// emulate daytona` serves it; tests start it in process.
//
// # What is real
//
// A sandbox is a box of the Docker vendor (vendors/docker) made from its
// snapshot's image, or from an image built with BuildKit (package
// boximage) for a sandbox created from an image or a Dockerfile
// (buildInfo): hardened, on the vendor's network. The toolbox runs what
// it is asked in that container, as the image's user (the sandbox's
// user, its home and work directory are that user's): /process/execute
// and /process/code-run through the sandbox's shell and interpreters,
// sessions as a long-lived shell fed with the daemon's own command
// wrapper (so logs carry the daemon's stream marks, exit codes land in
// the same files, input goes through the same pipes), the file system
// API and git with the image's own tools, files through the engine's
// archive API. Snapshots pull their image from its registry into the
// engine; GET /docker-registry/registry-push-access hands out
// credentials for the configured registry (DefaultRegistry unless told
// otherwise). Preview requests are proxied to the container's address on
// its network, from a loopback listener per sandbox port.
//
// # Lifetimes
//
// Sandboxes go as Daytona's do: stopped after autoStopInterval minutes
// without toolbox or preview activity, deleted autoDeleteInterval minutes
// after they stop (0: at once; negative: never), and stopped when their
// container ends by itself. A stopped (or archived) sandbox's container
// is frozen, so start resumes it with its files and processes. The
// container runs the image's own init, so a box image's init ends it at
// BOX_DEADLINE from the sandbox's environment (the emulator's one
// departure from Daytona, where the daemon is the container's first
// process). Closing the server removes every container it made.
//
// # Faults
//
// Faults make control plane calls fail with 429 (with Retry-After-<
// throttler> headers) or 5xx at a rate, a 5xx sometimes after the call
// took effect; slow sandbox starts; and sandboxes that vanish (Vanish, or
// every one some time after its start), deleted behind their clients'
// backs with their streams cut. Faults, the registry of the sandboxes'
// Docker boxes and the listener are those of every emulator (package
// vendors/emukit).
//
// # Departures
//
// One organization and one target (Target); no regions. Computer use,
// LSP, pty, the code interpreter's contexts, volumes, object storage
// (build contexts), pauses and resizes answer a typed 501 naming the
// feature. Its sandboxes are container sandboxes, so a fork is refused
// (422) as Daytona refuses one; a sandbox snapshot (POST
// /sandbox/{id}/snapshot) commits the sandbox's container.
package daytonaemu
