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
)
