// Package daytona is the Daytona vendor (daytona.io): a box is a Daytona
// sandbox, made from a snapshot, driven through Daytona's control plane
// and the toolbox (the daemon in every sandbox). One client, New, serves
// the box API (vendors.Vendor) and publishing box images as snapshots
// (vendors.ImageImporter, vendors.ImageRegistry).
//
// # Calls
//
// Every call carries the API key as a bearer (and
// X-Daytona-Organization-ID with WithOrganization). Calls go through
// internal/vendorhttp: throttling (429, honouring Retry-After and
// Daytona's Retry-After-<throttler>) and connections never made are
// retried for every call, server errors only for calls safe to repeat, a
// bounded number of times. Failures are the vendors' typed errors where
// the answer says which (404 of a box: vendors.ErrNotFound; 429 and the
// organization's quota: *vendors.RateLimitError), with the *APIError
// (status, error, message, path) in their chain.
//
// # Boxes
//
// Create posts a sandbox (POST /sandbox) with boxmeta's labels (the run
// tag, owner and deadline among them, and a token unique to the call), the
// environment plus BOX_DEADLINE, whole cores and GiB, and lifetimes Daytona
// enforces itself: autoStopInterval, the lifetime in minutes rounded up
// (Daytona stops a sandbox idle that long), and autoDeleteInterval 0 (a
// stopped sandbox is deleted at once). The deadline itself is enforced in
// the box: the image's init reads BOX_DEADLINE, a watchdog ends every
// process Spawn starts at the deadline, and every Exec's toolbox timeout
// ends there too. Create then polls the
// sandbox (GET /sandbox/{id}) until it is started, under a deadline
// (WithCreateTimeout); error and build_failed end the wait with a
// *CreateError carrying Daytona's errorReason, and the sandbox is deleted.
//
// A create whose answer is lost or is a server error may still have made
// the sandbox: before asking again, Create looks it up by its run tag and
// token, then by its name, which is unique to the call, so a second attempt
// after an unseen success is refused as a duplicate name rather than
// making a second sandbox.
//
// List reads GET /sandbox?labels={json} in both shapes it has had (a plain
// array; v0.190's {items, nextCursor}, followed page by page). A sandbox
// whose desired state is destroyed counts as gone everywhere. Destroy is
// DELETE /sandbox/{id}, repeated while the sandbox's state is changing
// (409).
//
// # Processes and files
//
// Exec runs through the toolbox's /process/execute, which answers one
// combined output and takes no standard input: the command runs in a small
// script that feeds its input from a file, keeps its stdout and stderr in
// files and answers them apart after a marker; its environment travels in
// the request's envs. A cancelled Exec kills the command's process group.
//
// Spawn makes a toolbox session named after the process and runs the
// process as the session's one asynchronous command
// (/process/session/{id}/exec, runAsync). Its environment reaches it
// through the command's standard input (/command/{id}/input, not echoed
// into the log): it is in no command text, no file and no configuration
// of the sandbox. Logs reads the command's log, Output follows it over the
// toolbox's WebSocket (both split stdout from stderr by the daemon's stream
// marks), Wait polls the command's exit code, Signal kills the pid the
// process recorded under ProcDir.
//
// Read and Write use /files/download and /files/upload-v2 (then
// /files/permissions for the mode).
//
// # Endpoints
//
// Endpoint asks for the port's preview URL
// (GET /sandbox/{id}/ports/{port}/preview-url): requests carry the
// X-Daytona-Preview-Token header, and go through a transport that turns a
// request or a stream of a sandbox that vanished into a
// *vendors.GoneError: while a response is open, the sandbox is checked
// every second (WithGoneCheckInterval), because Daytona's proxy may just
// stop a stream whose sandbox went. Only the ports the box was created
// with are served (their list is a label). Host names under localhost
// reach the loopback (RFC 6761), as the preview URLs of Daytona run
// locally (and of package daytonaemu, its emulator) need.
//
// # Snapshots
//
// PushTarget gets temporary push access to Daytona's own registry
// (GET /docker-registry/registry-push-access); ImportImage makes a
// snapshot of the pushed image (POST /snapshots) and polls it until it is
// active; error and build_failed end the wait with a *SnapshotFailedError.
package daytona
