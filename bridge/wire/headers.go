package wire

// Header names of the protocol.
const (
	HeaderRunID            = "X-Run-Id"
	HeaderRunRequestDigest = "X-Run-Request-Digest"
	HeaderRunProvider      = "X-Run-Provider"
	HeaderRunEnvironmentID = "X-Run-Environment-Id"
	HeaderRunSessionID     = "X-Run-Session-Id"
	HeaderRunExecutionID   = "X-Run-Execution-Id"
	HeaderRunStatus        = "X-Run-Status"
	HeaderRunState         = "X-Run-State"
	HeaderRunTerminal      = "X-Run-Terminal"
	HeaderSessionID        = "X-Session-Id"
	HeaderLastEventID      = "Last-Event-ID"
	HeaderXLastEventID     = "X-Last-Event-Id"
	HeaderRetryAfter       = "Retry-After"
	HeaderBridgeMode       = "X-Bridge-Mode"
	HeaderSandbox          = "X-Sandbox"
)

// Bridge modes of a chat request (its `mode`, or the X-Bridge-Mode
// header, or X-Sandbox: 1 for ModeHostedSandboxed). This bridge enforces
// only ModeBYOB: the caller brings the box it runs in.
const (
	ModeBYOB            = "byob"
	ModeHostedSafe      = "hosted-safe"
	ModeHostedSandboxed = "hosted-sandboxed"
)
