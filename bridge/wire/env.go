package wire

// Environment variables that configure a bridge process, for the code
// that launches one (the sandbox provider, tests). bridge-protocol.md
// lists the rest.
const (
	// EnvBearer is the bearer every route but /health requires. Secret.
	EnvBearer = "BRIDGE_BEARER"
	// EnvRouterKey is the model Router key the harnesses use. Secret.
	EnvRouterKey = "TANGLE_API_KEY"
	// EnvRouterURL is the model Router's base URL.
	EnvRouterURL = "TANGLE_ROUTER_URL"
	// EnvHost and EnvPort are the listen address.
	EnvHost = "BRIDGE_HOST"
	EnvPort = "BRIDGE_PORT"
	// EnvBackends lists the backend keys to register.
	EnvBackends = "BRIDGE_BACKENDS"
	// EnvDataDir is the durable store's directory.
	EnvDataDir = "BRIDGE_DATA_DIR"
	// EnvProfilesDir is the directory of the profile catalog
	// (GET /v1/profiles), one <id>.json file per profile; the TypeScript
	// bridge's name for it.
	EnvProfilesDir = "SANDBOX_PROFILES_DIR"
	// EnvLogLevel is debug, info, warn or error.
	EnvLogLevel = "BRIDGE_LOG_LEVEL"
	// EnvSSEHeartbeat is the idle time, in milliseconds, after which an
	// SSE stream gets a `: keepalive` comment (default 15 s: under the
	// 16 s idle bound common load balancers cut at).
	EnvSSEHeartbeat = "BRIDGE_SSE_HEARTBEAT_MS"
	// EnvJailMode is the operator's file-system jail floor (off,
	// write-jail or fs-jail): every turn is confined at least that much.
	EnvJailMode = "BRIDGE_JAIL_MODE"
	// EnvNetJailMode is the operator's network jail floor (off or
	// net-jail).
	EnvNetJailMode = "BRIDGE_NET_JAIL_MODE"
	// EnvWorkerFSJail and EnvWorkerNetJail, when 1, true, yes or on,
	// raise the floors to fs-jail and net-jail.
	EnvWorkerFSJail  = "WORKER_FS_JAIL"
	EnvWorkerNetJail = "WORKER_NET_JAIL"
)
