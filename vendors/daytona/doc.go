// Package daytona talks to Daytona (daytona.io), a cloud of sandboxes.
//
// SnapshotClient publishes box images: it gets temporary push access to
// Daytona's own registry (GET /docker-registry/registry-push-access),
// creates a snapshot from a pushed image (POST /snapshots) and polls it
// (GET /snapshots/{id or name}) until it is active; error and build_failed
// end the wait with a *SnapshotFailedError. Calls authenticate with a
// bearer key, retry throttling (429, honouring Retry-After-<throttler>) and
// transient failures a bounded number of times, and fail with a
// *SnapshotAPIError carrying status and message.
//
// Local fakes of these APIs for tests live in package daytonafake.
package daytona
