package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
)

// Exact process environments (POST /v1/exact/environments and the routes
// under it): a keyed environment with no agent process in it, where a
// caller writes and reads files and runs shell-free processes under a
// jail, as the TypeScript AgentExactProcessProvider contract asks. Field
// names are that contract's.

// Error types of the exact process routes.
const (
	// TypeEnvironmentConflict is an idempotency key reused with a
	// different create request (409).
	TypeEnvironmentConflict = "environment_conflict"
	// TypeFileTooLarge is a file read whose file is larger than its
	// maxBytes (422); nothing of the file is sent.
	TypeFileTooLarge = "file_too_large"
)

// ExactImageBox is the one image an exact environment of this bridge
// runs: the file system of the box the bridge runs in, read-only, with a
// private /tmp.
const ExactImageBox = "box"

// Exact egress modes. A bridge enforces blocked only: its processes get a
// network namespace of their own with loopback alone.
const (
	EgressBlocked = "blocked"
	EgressStrict  = "strict"
)

// Statuses of an ExactEnvironmentResult.
const (
	ExactCreated  = "created"
	ExactReplayed = "replayed"
)

// Termination kinds of an exact process.
const (
	TerminationExit      = "exit"
	TerminationTimeout   = "timeout"
	TerminationSignal    = "signal"
	TerminationCancelled = "cancelled"
)

// Bounds of the exact process routes.
const (
	// MaxExactFileBytes bounds one file written or read, and each output
	// stream a process keeps.
	MaxExactFileBytes = 4 << 20
	// MaxExactArgs bounds a launch's arguments and its environment's
	// entries.
	MaxExactArgs = 1024
	// MaxExactLifetimeMS bounds an environment's lifetime (7 days).
	MaxExactLifetimeMS = 7 * 24 * 3600 * 1000
	// MaxExactProcesses bounds the processes one environment starts.
	MaxExactProcesses = 1024
)

// ExactEnvironmentRequest is the body of POST /v1/exact/environments. A
// repeated request with the same idempotencyKey returns the same
// environment; the same key with any other field different is a
// TypeEnvironmentConflict.
type ExactEnvironmentRequest struct {
	IdempotencyKey string `json:"idempotencyKey" jsonschema:"minLength=1,maxLength=512"`
	// Image must be ExactImageBox.
	Image  string      `json:"image" jsonschema:"minLength=1"`
	Egress ExactEgress `json:"egress"`
	// MaxLifetimeMS is how long the environment lives; it is destroyed
	// then, its processes killed.
	MaxLifetimeMS      int64          `json:"maxLifetimeMs" jsonschema:"minimum=1"`
	ProvisionTimeoutMS *int64         `json:"provisionTimeoutMs,omitempty" jsonschema:"minimum=1"`
	Resources          ExactResources `json:"resources"`
	// Metadata is the caller's; GET /v1/exact/environments?metadata=
	// selects on it.
	Metadata map[string]json.RawMessage `json:"metadata"`
}

// ExactEgress is the outbound network policy of an exact environment.
type ExactEgress struct {
	Mode         string   `json:"mode" jsonschema:"enum=blocked,enum=strict"`
	AllowDomains []string `json:"allowDomains,omitempty"`
}

// ExactResources are the limits of every process of an exact environment:
// CPU cores (its processes run on that many of the box's CPUs), data
// memory and the size of one file, in mebibytes.
type ExactResources struct {
	CPU      float64 `json:"cpu" jsonschema:"exclusiveMinimum=0"`
	MemoryMB int64   `json:"memoryMb" jsonschema:"minimum=1"`
	DiskMB   int64   `json:"diskMb" jsonschema:"minimum=1"`
}

// Validate checks a create request's fields, its image and egress
// against what this bridge enforces (TypeInvalidRequest).
func (r *ExactEnvironmentRequest) Validate() error {
	switch {
	case ValidIdentifier(r.IdempotencyKey) != nil:
		return fmt.Errorf("idempotencyKey %v", ValidIdentifier(r.IdempotencyKey))
	case r.Image != ExactImageBox:
		return fmt.Errorf("image %q is not served here: exact processes run on the box's own file system, image %q", r.Image, ExactImageBox)
	case r.Egress.Mode == EgressStrict:
		return errors.New("egress mode strict is not enforced here (only blocked): refusing rather than weakening it")
	case r.Egress.Mode != EgressBlocked:
		return fmt.Errorf("egress mode %q is not blocked or strict", r.Egress.Mode)
	case len(r.Egress.AllowDomains) > 0:
		return errors.New("egress allowDomains belong to mode strict")
	case r.MaxLifetimeMS < 1 || r.MaxLifetimeMS > MaxExactLifetimeMS:
		return fmt.Errorf("maxLifetimeMs must be 1 to %d", MaxExactLifetimeMS)
	case r.ProvisionTimeoutMS != nil && *r.ProvisionTimeoutMS < 1:
		return errors.New("provisionTimeoutMs must be positive")
	case !(r.Resources.CPU > 0) || r.Resources.CPU > 4096:
		return errors.New("resources.cpu must be positive")
	case r.Resources.MemoryMB < 1 || r.Resources.MemoryMB > 1<<30:
		return errors.New("resources.memoryMb must be a positive integer")
	case r.Resources.DiskMB < 1 || r.Resources.DiskMB > 1<<30:
		return errors.New("resources.diskMb must be a positive integer")
	case r.Metadata == nil:
		return errors.New("metadata is required (an object)")
	}
	return nil
}

// Digest is the request digest an idempotency key is bound to: every
// field but the key and the provision timeout (how long a caller waits
// changes nothing of the environment).
func (r *ExactEnvironmentRequest) Digest() (string, error) {
	return Digest(material(r, "idempotencyKey", "provisionTimeoutMs"))
}

// ExactEnvironment is the view of an exact environment.
type ExactEnvironment struct {
	ID             string                     `json:"id"`
	IdempotencyKey string                     `json:"idempotencyKey"`
	RequestDigest  string                     `json:"requestDigest"`
	Image          string                     `json:"image"`
	Egress         ExactEgress                `json:"egress"`
	Resources      ExactResources             `json:"resources"`
	MaxLifetimeMS  int64                      `json:"maxLifetimeMs"`
	Metadata       map[string]json.RawMessage `json:"metadata"`
	CreatedAt      string                     `json:"createdAt"`
	ExpiresAt      string                     `json:"expiresAt"`
}

// ExactEnvironmentResult answers POST /v1/exact/environments: 201
// created, or 200 replayed for a repeated request.
type ExactEnvironmentResult struct {
	Status      string           `json:"status" jsonschema:"enum=created,enum=replayed"`
	Environment ExactEnvironment `json:"environment"`
}

// ExactEnvironmentList answers GET /v1/exact/environments: the live
// environments whose metadata holds every entry of the query's.
type ExactEnvironmentList struct {
	Environments []ExactEnvironment `json:"environments"`
}

// ExactDestroyResult answers DELETE /v1/exact/environments/{id}.
type ExactDestroyResult struct {
	ID string `json:"id"`
	// Status is destroyed, or already_destroyed for a repeat.
	Status string `json:"status" jsonschema:"enum=destroyed,enum=already_destroyed"`
}

// ExactFileWrite is the body of PUT /v1/exact/environments/{id}/files:
// the bytes (standard base64) of an absolute path under /tmp, with its
// POSIX mode.
type ExactFileWrite struct {
	Path    string `json:"path" jsonschema:"minLength=1"`
	Mode    int    `json:"mode" jsonschema:"minimum=0,maximum=4095"`
	Content string `json:"content" jsonschema:"contentEncoding=base64"`
}

// ExactFileRead is the body of POST /v1/exact/environments/{id}/files/read.
type ExactFileRead struct {
	Path     string `json:"path" jsonschema:"minLength=1"`
	MaxBytes int64  `json:"maxBytes" jsonschema:"minimum=1"`
}

// ExactFile answers a file read or write: its path, size and (for a
// read) its bytes in standard base64.
type ExactFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Content string `json:"content,omitempty" jsonschema:"contentEncoding=base64"`
}

// ExactPath checks that p names a file of an exact environment's own
// file system, /tmp (the rest is the box's, read-only), and returns it
// relative to /tmp.
func ExactPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", fmt.Errorf("path %q must be absolute", p)
	}
	clean := path.Clean(p)
	rel, ok := strings.CutPrefix(clean, "/tmp/")
	if !ok || clean != p {
		return "", fmt.Errorf("path %q must be a clean path under /tmp, the environment's writable file system", p)
	}
	return rel, nil
}

// ExactLaunch is the body of POST /v1/exact/environments/{id}/processes:
// a shell-free process whose environment is exactly Env.
type ExactLaunch struct {
	// Executable is absolute, or found on Env's PATH.
	Executable string            `json:"executable" jsonschema:"minLength=1"`
	Args       []string          `json:"args"`
	Cwd        string            `json:"cwd" jsonschema:"minLength=1"`
	Env        map[string]string `json:"env"`
	Stdin      *string           `json:"stdin,omitempty"`
	// TimeoutMS kills the process after that long; 0 means none.
	TimeoutMS int64 `json:"timeoutMs" jsonschema:"minimum=0"`
}

// Validate checks a launch (TypeInvalidRequest).
func (l *ExactLaunch) Validate() error {
	nul := func(s string) bool { return strings.ContainsRune(s, 0) }
	switch {
	case l.Executable == "" || nul(l.Executable):
		return errors.New("executable is required and holds no NUL")
	case !strings.HasPrefix(l.Executable, "/") && strings.TrimSpace(l.Env["PATH"]) == "":
		return errors.New("executable must be absolute unless env.PATH is given")
	case l.Args == nil || len(l.Args) > MaxExactArgs:
		return fmt.Errorf("args is required, at most %d", MaxExactArgs)
	case l.Env == nil || len(l.Env) > MaxExactArgs:
		return fmt.Errorf("env is required (an object), at most %d entries", MaxExactArgs)
	case !strings.HasPrefix(l.Cwd, "/") || nul(l.Cwd):
		return errors.New("cwd must be absolute")
	case l.TimeoutMS < 0 || l.TimeoutMS > MaxExactLifetimeMS:
		return errors.New("timeoutMs must be a non-negative integer")
	case l.Stdin != nil && len(*l.Stdin) > MaxExactFileBytes:
		return fmt.Errorf("stdin exceeds %d bytes", MaxExactFileBytes)
	}
	for _, a := range l.Args {
		if nul(a) {
			return errors.New("an argument holds a NUL")
		}
	}
	for k, v := range l.Env {
		if k == "" || nul(k) || nul(v) || strings.ContainsRune(k, '=') {
			return fmt.Errorf("env key %q is not a variable name", k)
		}
	}
	return nil
}

// ExactTermination is why an exact process ended: kind exit (with
// exitCode), timeout (with timeoutMs), signal (with signal) or cancelled.
type ExactTermination struct {
	Kind      string `json:"kind" jsonschema:"enum=exit,enum=timeout,enum=signal,enum=cancelled"`
	ExitCode  *int   `json:"exitCode,omitempty"`
	TimeoutMS *int64 `json:"timeoutMs,omitempty"`
	Signal    string `json:"signal,omitempty"`
}

// ExactProcessStatus is the state of an exact process. PID is its number
// in its environment (1, 2, ...: never reused there). ExitCode is -1
// while it runs; a terminal status has a Termination.
type ExactProcessStatus struct {
	PID         int64             `json:"pid" jsonschema:"minimum=1"`
	Running     bool              `json:"running"`
	ExitCode    int               `json:"exitCode"`
	ExitSignal  string            `json:"exitSignal,omitempty"`
	Termination *ExactTermination `json:"termination,omitempty"`
	StartedAt   string            `json:"startedAt"`
	EndedAt     string            `json:"endedAt,omitempty"`
}

// ExactProcessList answers GET /v1/exact/environments/{id}/processes.
type ExactProcessList struct {
	Processes []ExactProcessStatus `json:"processes"`
}
