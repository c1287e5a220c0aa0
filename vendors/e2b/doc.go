// Package e2b is the E2B vendor (e2b.dev): a box is an E2B sandbox, a
// Firecracker microVM made from a template. One client, New(apiKey,
// opts...), serves both the box API (vendors.Vendor) and publishing box
// images as templates (vendors.ImageImporter).
//
// # Control plane
//
// Calls go to https://api.{domain} (spec/openapi.yml) with X-API-Key,
// through internal/vendorhttp: throttling (429) is retried with backoff
// honouring Retry-After, a bounded number of times; reads are retried on
// server errors too. The client calls only routes that the pinned official
// SDK's bundled spec has and does not mark deprecated (create is
// POST /v2/sandboxes, connect POST /v2/sandboxes/{id}/connect; a test
// checks every request against the SDK's route tables). Create sends the lifetime as the sandbox's timeout,
// so E2B ends it by itself, and the box's labels (boxmeta) as its
// metadata, so List (GET /v2/sandboxes?metadata=..., paged by
// X-Next-Token) and gc find it by run tag. A create whose outcome is
// unknown (a server error, a cut connection) is never simply repeated:
// every create carries a token of its own (boxmeta.LabelCreate), the
// client looks the sandbox up by it first, and keeps exactly one.
//
// # In the sandbox
//
// envd, the daemon in every sandbox, is reached at
// {scheme}://49983-{sandboxID}.{domain} with the sandbox's access token
// (every v2 sandbox is secure), as the template's own user unless WithUser
// names one. Exec uses its Connect-RPC process API in the JSON encoding
// (process.Process/Start streams envelopes; an end-of-stream frame carries
// any error; keepalives are skipped; stdin goes in with SendInput, then
// CloseStdin), and that exec is the Runner of the process layer
// (vendors/boxproc), which writes Spawn and the Process: a process envd
// started outlives the stream that started it, so Spawn runs the command
// under a supervisor that records its pid, output and exit status in the
// sandbox (under /tmp/.boxctl/proc), as the Docker and Kubernetes vendors
// do; the process's environment travels on the supervisor's stdin, in no
// command line and nothing the control plane shows. Read and Write use
// envd's /files. Endpoint is {scheme}://{port}-{sandboxID}.{domain} with
// the e2b-traffic-access-token header (sandboxes are created with
// allowPublicTraffic false).
//
// # Errors
//
// A missing sandbox is a *vendors.NotFoundError; the proxy's 502 "The
// sandbox was not found", or a stream cut while the control plane no
// longer knows the sandbox, is a *vendors.GoneError, returned as soon as
// the cut is seen, never after a timeout; throttling that outlasts the
// retries is a *vendors.RateLimitError. Other answers are an *APIError
// (status, error_code, message) or, from envd's process API, a
// *ConnectError.
//
// # Reaching a local emulator
//
// WithDial sends every request for the domain and hosts under it to one
// address, as curl's --resolve does, and WithScheme("http") drops TLS: how
// the client reaches `boxctl emulate e2b` (package e2bemu) on loopback.
// No code path of the client knows about the emulator.
package e2b
