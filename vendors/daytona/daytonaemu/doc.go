// Package daytonaemu is a local emulator of Daytona: its control plane
// (https://app.daytona.io/api), its toolbox (the daemon in every sandbox,
// reached through the proxy at {toolboxProxyUrl}/{sandboxId}) and its
// preview proxy ({port}-{sandboxId}.{proxyDomain}), answering as the
// published OpenAPI documents and the services' code say (daytonaio/
// daytona v0.190: paths, status codes, field names, error bodies, states),
// with a real container on the local Docker engine behind every sandbox.
// `boxctl emulate daytona` serves it; tests start it in process.
//
// # What is real
//
// A sandbox is a box of the Docker vendor (vendors/docker) made from its
// snapshot's image: hardened, on the vendor's network. The toolbox runs
// what it is asked in that container: /process/execute through the
// sandbox's shell, sessions as a long-lived shell fed with the daemon's
// own command wrapper (so logs carry the daemon's stream marks, exit codes
// land in the same files, input goes through the same pipes), files
// through the engine's archive API. Snapshots pull their image from its
// registry into the engine (GET /docker-registry/registry-push-access
// hands out the credentials the pull uses for the configured registry).
// Preview requests are proxied to the container's address on its network.
//
// # Lifetimes
//
// Sandboxes go as Daytona's do: stopped after autoStopInterval minutes
// without toolbox or preview activity, deleted autoDeleteInterval minutes
// after they stop (0: at once; negative: never), and stopped when their
// container ends by itself. The container runs the image's own init, so a
// box image's init ends it at BOX_DEADLINE from the sandbox's environment
// (the emulator's one departure from Daytona, where the daemon is the
// container's first process). Closing the server removes every container
// it made.
//
// # Faults
//
// Faults make control plane calls fail with 429 (with Retry-After-<
// throttler> headers) or 5xx at a rate, a 5xx sometimes after the call
// took effect; slow sandbox starts; and sandboxes that vanish (Vanish, or
// every one some time after its start), deleted behind their clients'
// backs with their streams cut.
//
// # Departures
//
// One organization; no regions, volumes, archives, forks, backups, or
// builds from a Dockerfile; a stopped sandbox cannot be started again
// (its container is gone). Routes the boxctl client does not use answer
// 404.
package daytonaemu
