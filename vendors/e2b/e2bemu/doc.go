// Package e2bemu is a local emulator of E2B: its control plane
// (spec/openapi.yml: sandboxes, template builds) and, for every sandbox,
// the proxy in front of it and its envd daemon (spec/envd/envd.yaml and
// the Connect services of process.proto and filesystem.proto), answering
// as the real services do: the same paths, status codes, field names,
// error bodies and Connect envelopes, with host-based routing of
// {port}-{sandboxID}.{domain} (and E2B's E2b-Sandbox-Id / E2b-Sandbox-Port
// headers for requests to an IP address, which is how the official SDKs
// send everything to E2B_SANDBOX_URL: see SDKEnv).
//
// The surface is the official SDK's (npm e2b, pinned in internal/jssdk):
// create and connect through /v2/sandboxes (connect resumes a paused
// sandbox; its body is optional), list by metadata, state and template
// with paging, info, kill, timeouts, pause (the container frozen, its
// timeout stopped) and metrics; envd processes (Docker execs as the
// request's user, with cwd, env, stdin, signals, and a pty that is a real
// terminal), files over /files (multipart with several files, octet-stream,
// gzip) and the filesystem service (stat, list with depth, make dir, move,
// remove, watches) run as the request's user in the container; snapshots
// of a running sandbox (its container committed to an image, a template
// POST /v2/sandboxes takes: see snapshot.go), listed by GET /snapshots and
// deleted with their template (DELETE /templates/{templateID}); forks of a
// running sandbox (POST /sandboxes/{id}/fork: one commit, count sandboxes
// of it, each fork's outcome an entry of its own: see fork.go). The user is
// the one a request names (Authorization Basic "<user>:"), else the
// image's own, as envd 0.4 and later do. Routes of the spec it does not
// emulate answer 501 with error_code NotEmulatedCode, naming the feature.
//
// Behind every sandbox is a real container on the local Docker engine,
// made and driven through the Docker vendor (vendors/docker): envd's
// processes are the Docker vendor's spawned processes, its files the
// container's, and a sandbox port is the container's port on the boxes'
// network. Timeouts are enforced: a sandbox is killed at its endAt, which
// POST /sandboxes/{id}/timeout, /refreshes and /v2/sandboxes/{id}/connect
// move as E2B does.
// A template build really pulls its image from the registry it names (with
// the credentials given, ECR's through an ECR endpoint); sandboxes of the
// template run that image.
//
// Faults, for tests and for users trying a client's resilience: a share of
// control plane calls answered 429 or 503 (a create's 503 sometimes after
// the sandbox was made, as when an answer is lost), a slow create, and
// sandboxes that vanish mid-run. See Faults: they, the registry of the
// sandboxes' Docker boxes and the listener are those of every emulator
// (package vendors/emukit).
//
// A Server is an http.Handler to mount, or, with Options.Addr, serves
// itself until Close (URL): `boxctl emulate e2b --addr 127.0.0.1:PORT`
// serves one so. The client (package e2b) reaches it with WithDial,
// WithDomain and WithScheme("http"); nothing in the client knows about
// the emulator.
//
// # Concurrency
//
// A Server is an http.Handler safe for concurrent use. Each sandbox has a
// context that every request routed to it derives from: killing the
// sandbox (DELETE, its timeout, a vanish fault) ends every stream and
// proxied connection of it at once, as the real proxy drops them. Close
// kills every sandbox the Server made and stops template builds.
package e2bemu
