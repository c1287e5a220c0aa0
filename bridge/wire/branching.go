package wire

import "encoding/json"

// Workspace branching: a checkpoint is a copy of the workspace a run
// worked in, taken after the run; a fork is a fresh environment (a
// workspace directory of its own) made from a checkpoint. Both are keyed
// by the caller's idempotency key and bound to the digest of their
// request, in the shapes of the TypeScript agent interface's
// WorkspaceCheckpoint*, WorkspaceFork* and WorkspaceCleanup* types. Every
// digest is Digest of the request's material: the request without its
// idempotency key and digest.

// Workspace operation statuses.
const (
	BranchCreated  = "created"
	BranchReplayed = "replayed"
	BranchFound    = "found"
	BranchNotFound = "not_found"
	BranchConflict = "conflict"
	BranchUnknown  = "unknown"
)

// Workspace cleanup statuses and kinds.
const (
	CleanupDeleted       = "deleted"
	CleanupAlreadyAbsent = "already_absent"
	CleanupInUse         = "in_use"
	CleanupConflict      = "conflict"
	CleanupKindFork      = "fork"
	CleanupKindCkpt      = "checkpoint"
)

// CheckpointRequest is the body of POST /v1/workspace/checkpoints: the
// exact run whose workspace is copied.
type CheckpointRequest struct {
	Source         RunRef          `json:"source"`
	Name           string          `json:"name,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey"`
	RequestDigest  string          `json:"requestDigest"`
}

// Material is what RequestDigest covers.
func (r CheckpointRequest) Material() any { return material(r, "idempotencyKey", "requestDigest") }

// CheckpointRef is one checkpoint. Its Provider is its source run's.
type CheckpointRef struct {
	CheckpointID   string          `json:"checkpointId"`
	Provider       string          `json:"provider"`
	Source         RunRef          `json:"source"`
	IdempotencyKey string          `json:"idempotencyKey"`
	RequestDigest  string          `json:"requestDigest"`
	CreatedAt      string          `json:"createdAt"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
}

// OperationLookup is the body of the lookup routes: an operation's key and
// the digest the caller expects it to be bound to.
type OperationLookup struct {
	IdempotencyKey string `json:"idempotencyKey"`
	RequestDigest  string `json:"requestDigest"`
}

// CheckpointResult answers a checkpoint request or its lookup: Checkpoint
// with created, replayed or found; ExistingRequestDigest with conflict;
// Message and Retryable with unknown; nothing more with not_found.
type CheckpointResult struct {
	Status                string         `json:"status" jsonschema:"enum=created,enum=replayed,enum=found,enum=not_found,enum=conflict,enum=unknown"`
	IdempotencyKey        string         `json:"idempotencyKey"`
	RequestDigest         string         `json:"requestDigest"`
	Checkpoint            *CheckpointRef `json:"checkpoint,omitempty"`
	ExistingRequestDigest string         `json:"existingRequestDigest,omitempty"`
	Message               string         `json:"message,omitempty"`
	Retryable             *bool          `json:"retryable,omitempty"`
}

// Placement says where an environment runs.
type Placement struct {
	Kind             string          `json:"kind" jsonschema:"enum=local,enum=sandbox,enum=fleet,enum=provider"`
	SandboxID        string          `json:"sandboxId,omitempty"`
	FleetID          string          `json:"fleetId,omitempty"`
	MachineID        string          `json:"machineId,omitempty"`
	Region           string          `json:"region,omitempty"`
	ProviderMetadata json.RawMessage `json:"providerMetadata,omitempty"`
}

// ForkRequest is the body of POST /v1/workspace/forks. Confidential is
// what the caller asks for; the bridge attests nothing and refuses a
// request for it.
type ForkRequest struct {
	Checkpoint     CheckpointRef   `json:"checkpoint"`
	Name           string          `json:"name,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	Placement      Placement       `json:"placement"`
	Confidential   json.RawMessage `json:"confidential,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey"`
	RequestDigest  string          `json:"requestDigest"`
}

// Material is what RequestDigest covers.
func (r ForkRequest) Material() any { return material(r, "idempotencyKey", "requestDigest") }

// ForkedEnvironment is the environment a fork made.
type ForkedEnvironment struct {
	Provider              string          `json:"provider"`
	EnvironmentID         string          `json:"environmentId"`
	SourceEnvironmentID   string          `json:"sourceEnvironmentId"`
	Source                RunRef          `json:"source"`
	SourceCheckpointID    string          `json:"sourceCheckpointId"`
	IdempotencyKey        string          `json:"idempotencyKey"`
	RequestDigest         string          `json:"requestDigest"`
	CreatedAt             string          `json:"createdAt"`
	Placement             Placement       `json:"placement"`
	ConfidentialRequested bool            `json:"confidentialRequested"`
	Metadata              json.RawMessage `json:"metadata,omitempty"`
}

// ForkResult answers a fork request or its lookup, as CheckpointResult.
type ForkResult struct {
	Status                string             `json:"status" jsonschema:"enum=created,enum=replayed,enum=found,enum=not_found,enum=conflict,enum=unknown"`
	IdempotencyKey        string             `json:"idempotencyKey"`
	RequestDigest         string             `json:"requestDigest"`
	Environment           *ForkedEnvironment `json:"environment,omitempty"`
	ExistingRequestDigest string             `json:"existingRequestDigest,omitempty"`
	Message               string             `json:"message,omitempty"`
	Retryable             *bool              `json:"retryable,omitempty"`
}

// ForkWorkspace is GET /v1/workspace/forks/:id: a live fork and the
// directory that is its workspace (a session's cwd).
type ForkWorkspace struct {
	Environment ForkedEnvironment `json:"environment"`
	Path        string            `json:"path"`
}

// CleanupRequest is the body of the cleanup routes. RequestDigest is
// Digest of {kind, targetId, provider}; one OperationID stays bound to it.
type CleanupRequest struct {
	OperationID   string `json:"operationId"`
	Kind          string `json:"kind" jsonschema:"enum=checkpoint,enum=fork"`
	TargetID      string `json:"targetId"`
	Provider      string `json:"provider"`
	RequestDigest string `json:"requestDigest"`
}

// Material is what RequestDigest covers.
func (r CleanupRequest) Material() any {
	return map[string]string{"kind": r.Kind, "targetId": r.TargetID, "provider": r.Provider}
}

// CleanupAck answers a cleanup: deleted, already_absent, in_use (with the
// BlockingTargetIDs that must go first) or conflict (with the digest the
// operation id is bound to).
type CleanupAck struct {
	OperationID           string   `json:"operationId"`
	Kind                  string   `json:"kind" jsonschema:"enum=checkpoint,enum=fork"`
	TargetID              string   `json:"targetId"`
	Provider              string   `json:"provider"`
	RequestDigest         string   `json:"requestDigest"`
	Status                string   `json:"status" jsonschema:"enum=deleted,enum=already_absent,enum=in_use,enum=conflict"`
	ExistingRequestDigest string   `json:"existingRequestDigest,omitempty"`
	Message               string   `json:"message,omitempty"`
	BlockingTargetIDs     []string `json:"blockingTargetIds,omitempty"`
}
