package bridge

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/harness/codex"
	"github.com/tangle-network/boxctl/bridge/harness/gemini"
	"github.com/tangle-network/boxctl/bridge/harness/opencode"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Adapters are the harness adapters the bridge knows, by backend key.
func Adapters() map[string]harness.Adapter {
	return map[string]harness.Adapter{"claude": claude.Adapter{}, "codex": codex.Adapter{}, "pi": pi.Adapter{}, "opencode": opencode.Adapter{},
		"gemini": gemini.Adapter{}}
}

// DefaultPort is the port the bridge listens on by default.
const DefaultPort = 3344

// Config is everything the bridge is configured with. Secrets (Bearer,
// RouterKey) come from the environment or from files, never from flags,
// so they do not show in process listings.
type Config struct {
	Host    string
	Port    int
	Bearer  string
	DataDir string
	// ProfilesDir holds the profile catalog (default ./profiles).
	ProfilesDir string
	// Backends are the backend keys to register, in matching order.
	Backends []string
	// Bins and Timeouts are per backend key (<KEY>_BIN, <KEY>_TIMEOUT_MS).
	Bins     map[string]string
	Timeouts map[string]time.Duration

	RouterKey, RouterURL string
	// JailFloor is the operator's confinement floor (BRIDGE_JAIL_MODE,
	// BRIDGE_NET_JAIL_MODE and their WORKER_* shorthands): every turn is
	// confined at least that much (jail.Floor).
	JailFloor jail.Floor

	MaxRuns      int
	MaxBodyBytes int64
	// BodyTimeout bounds the arrival of a request body
	// (server.Options.BodyTimeout); ConnIdle closes a keep-alive
	// connection idle that long; MaxConns caps the open client
	// connections (more wait to be accepted). 0 means the defaults.
	BodyTimeout time.Duration
	ConnIdle    time.Duration
	MaxConns    int
	Keepalive   time.Duration
	IdleTimeout time.Duration
	// SessionIdle is how long a retained session's harness process waits
	// for the next turn (engine.Options.SessionIdleTimeout).
	SessionIdle time.Duration
	// MaxSessionProcs is the most such processes kept idle at once
	// (engine.Options.MaxSessionProcs).
	MaxSessionProcs int
	// NoSpares turns off the harness processes started ahead of the
	// turns that are likely next (engine.Options.Spares).
	NoSpares bool
	// PrestartCwd is the working directory of the first turn expected
	// (wire.EnvPrestartCwd); "" for no spare before a first turn.
	PrestartCwd string
	// PrestartModel is that first turn's model (wire.EnvPrestartModel).
	PrestartModel string
	// ModelRelay points the harnesses at the bridge's model relay on
	// loopback (wire.EnvModelRelay).
	ModelRelay bool
	// RouterCA are PEM certificates the relay trusts beside the system's
	// (wire.EnvRouterCA); they need ModelRelay.
	RouterCA string
	// SessionIdleClose is how long an open retained session may go
	// without a turn before the bridge closes it (store.Options
	// SessionIdle): 0 means 24 h, negative never.
	SessionIdleClose time.Duration
	ResultGrace      time.Duration
	MaxLifetime      time.Duration
	MaxEvents        int64
	MaxBytes         int64
	ReplayTTL        time.Duration
	IdentityTTL      time.Duration
	LogLevel         string
	// Listener, when set, is the socket Serve serves on instead of
	// listening on Host:Port (a supervised bridge's, package supervisor).
	Listener net.Listener
	// DeadlineFile is where a pooled bridge writes its claim's deadline
	// (wire.EnvDeadlineFile); "" for nowhere.
	DeadlineFile string
}

// ConfigFromEnv reads the configuration from environment variables (see
// bridge-protocol.md); getenv is os.Getenv in production.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Host: or(getenv(wire.EnvHost), "127.0.0.1"), Port: DefaultPort, Bearer: getenv(wire.EnvBearer),
		DataDir: or(getenv(wire.EnvDataDir), "./data"), ProfilesDir: or(getenv(wire.EnvProfilesDir), "./profiles"), Bins: map[string]string{}, Timeouts: map[string]time.Duration{},
		RouterKey: getenv(harness.RouterKeyVar), RouterURL: getenv(wire.EnvRouterURL), LogLevel: or(getenv(wire.EnvLogLevel), "info"),
		DeadlineFile: getenv(wire.EnvDeadlineFile),
	}
	var errs []error
	intVar := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a non-negative integer", name, v))
				return
			}
			*dst = n
		}
	}
	int64Var := func(name string, dst *int64) {
		var n int
		intVar(name, &n)
		if n > 0 {
			*dst = int64(n)
		}
	}
	msVar := func(name string, dst *time.Duration) {
		var n int
		intVar(name, &n)
		if n > 0 {
			*dst = time.Duration(n) * time.Millisecond
		}
	}
	// signedMsVar is msVar for the durations where a negative value
	// means "never" (or "off").
	signedMsVar := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: want an integer", name, v))
				return
			}
			if n != 0 {
				*dst = time.Duration(n) * time.Millisecond
			}
		}
	}
	intVar(wire.EnvPort, &c.Port)
	intVar("BRIDGE_MAX_RUNS", &c.MaxRuns)
	int64Var("BRIDGE_MAX_BODY_BYTES", &c.MaxBodyBytes)
	msVar("BRIDGE_BODY_TIMEOUT_MS", &c.BodyTimeout)
	msVar("BRIDGE_CONN_IDLE_MS", &c.ConnIdle)
	intVar("BRIDGE_MAX_CONNS", &c.MaxConns)
	msVar(wire.EnvSSEHeartbeat, &c.Keepalive)
	msVar("BRIDGE_IDLE_TIMEOUT_MS", &c.IdleTimeout)
	signedMsVar("BRIDGE_SESSION_IDLE_MS", &c.SessionIdle)
	intVar("BRIDGE_MAX_SESSION_PROCS", &c.MaxSessionProcs)
	c.NoSpares = getenv("BRIDGE_SPARES") == "0"
	c.PrestartCwd = getenv(wire.EnvPrestartCwd)
	c.PrestartModel = getenv(wire.EnvPrestartModel)
	c.ModelRelay = getenv(wire.EnvModelRelay) == "1"
	c.RouterCA = getenv(wire.EnvRouterCA)
	signedMsVar("BRIDGE_SESSION_IDLE_CLOSE_MS", &c.SessionIdleClose)
	msVar("BRIDGE_RESULT_GRACE_MS", &c.ResultGrace)
	msVar("BRIDGE_MAX_RUN_MS", &c.MaxLifetime)
	int64Var("BRIDGE_REPLAY_MAX_EVENTS", &c.MaxEvents)
	int64Var("BRIDGE_REPLAY_MAX_BYTES", &c.MaxBytes)
	msVar("BRIDGE_REPLAY_RETENTION_MS", &c.ReplayTTL)
	msVar("BRIDGE_IDENTITY_RETENTION_MS", &c.IdentityTTL)
	floor, err := jail.ParseFloor(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.JailFloor = floor
	c.Backends = splitList(or(getenv(wire.EnvBackends), "claude"))
	for key := range Adapters() {
		up := strings.ToUpper(key)
		if v := getenv(up + "_BIN"); v != "" {
			c.Bins[key] = v
		}
		var d time.Duration
		msVar(up+"_TIMEOUT_MS", &d)
		if d > 0 {
			c.Timeouts[key] = d
		}
	}
	return c, errors.Join(errs...)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, strings.ToLower(p))
		}
	}
	return out
}

// RegisterFlags adds flags that override c's values (already read from
// the environment) to fs. Secrets are taken from files (-bearer-file,
// -router-key-file); apply them with LoadSecretFiles after parsing.
func (c *Config) RegisterFlags(fs *flag.FlagSet) *SecretFiles {
	sf := &SecretFiles{}
	fs.StringVar(&c.Host, "host", c.Host, "listen address (BRIDGE_HOST)")
	fs.IntVar(&c.Port, "port", c.Port, "listen port, 0 for any (BRIDGE_PORT)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "durable state directory (BRIDGE_DATA_DIR)")
	fs.StringVar(&c.ProfilesDir, "profiles-dir", c.ProfilesDir, "profile catalog directory (SANDBOX_PROFILES_DIR)")
	fs.Func("backends", "comma list of backend keys (BRIDGE_BACKENDS, default claude)", func(s string) error {
		c.Backends = splitList(s)
		return nil
	})
	fs.StringVar(&c.RouterURL, "router-url", c.RouterURL, "model router base URL (TANGLE_ROUTER_URL)")
	fs.IntVar(&c.MaxRuns, "max-runs", c.MaxRuns, "most concurrent runs; 0 for the default 4 (BRIDGE_MAX_RUNS)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", c.MaxBodyBytes, "request body limit; 0 for 10 MiB (BRIDGE_MAX_BODY_BYTES)")
	fs.DurationVar(&c.BodyTimeout, "body-timeout", c.BodyTimeout, "time a request body may take to arrive in full; 0 for 60s (BRIDGE_BODY_TIMEOUT_MS)")
	fs.DurationVar(&c.ConnIdle, "conn-idle", c.ConnIdle, "close a keep-alive connection idle this long; 0 for 60s (BRIDGE_CONN_IDLE_MS)")
	fs.IntVar(&c.MaxConns, "max-conns", c.MaxConns, "most open client connections, more wait to be accepted; 0 for 256 (BRIDGE_MAX_CONNS)")
	fs.DurationVar(&c.Keepalive, "keepalive", c.Keepalive, "SSE keepalive interval; 0 for 15s (BRIDGE_SSE_HEARTBEAT_MS)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "kill a harness silent this long; 0 for 10m (BRIDGE_IDLE_TIMEOUT_MS)")
	fs.DurationVar(&c.SessionIdle, "session-idle", c.SessionIdle, "time a retained session's harness process waits for the next turn; 0 for 5m, negative for a fresh process per turn (BRIDGE_SESSION_IDLE_MS)")
	fs.BoolVar(&c.NoSpares, "no-spares", c.NoSpares, "start no harness process ahead of the turn that is likely next (BRIDGE_SPARES=0)")
	fs.BoolVar(&c.ModelRelay, "model-relay", c.ModelRelay, "point the harnesses at a model endpoint of the bridge's on loopback, which presents the router key for them ("+wire.EnvModelRelay+"=1)")
	fs.IntVar(&c.MaxSessionProcs, "max-session-procs", c.MaxSessionProcs, "most retained-session harness processes kept waiting, the one idle longest ended first; 0 for max-runs (BRIDGE_MAX_SESSION_PROCS)")
	fs.DurationVar(&c.SessionIdleClose, "session-idle-close", c.SessionIdleClose, "close an open retained session without a turn this long; 0 for 24h, negative never (BRIDGE_SESSION_IDLE_CLOSE_MS)")
	fs.DurationVar(&c.ResultGrace, "result-grace", c.ResultGrace, "time a harness may take to exit after its result; 0 for 2s (BRIDGE_RESULT_GRACE_MS)")
	fs.DurationVar(&c.MaxLifetime, "max-run", c.MaxLifetime, "longest a run may live; 0 for 6h (BRIDGE_MAX_RUN_MS)")
	fs.Int64Var(&c.MaxEvents, "replay-max-events", c.MaxEvents, "events kept per run; 0 for 10000 (BRIDGE_REPLAY_MAX_EVENTS)")
	fs.Int64Var(&c.MaxBytes, "replay-max-bytes", c.MaxBytes, "event bytes kept per run; 0 for 32 MiB (BRIDGE_REPLAY_MAX_BYTES)")
	fs.DurationVar(&c.ReplayTTL, "replay-retention", c.ReplayTTL, "full replay kept after a run ends (then its result only); 0 for 1h (BRIDGE_REPLAY_RETENTION_MS)")
	fs.DurationVar(&c.IdentityTTL, "identity-retention", c.IdentityTTL, "run id binding kept; 0 for 24h (BRIDGE_IDENTITY_RETENTION_MS)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (BRIDGE_LOG_LEVEL)")
	fs.StringVar(&sf.Bearer, "bearer-file", "", "read the bearer token from this file (else BRIDGE_BEARER)")
	fs.StringVar(&sf.RouterKey, "router-key-file", "", "read the router key from this file (else TANGLE_API_KEY)")
	for key := range Adapters() {
		fs.Func(key+"-bin", "the "+key+" binary ("+strings.ToUpper(key)+"_BIN)", func(s string) error {
			c.Bins[key] = s
			return nil
		})
		fs.Func(key+"-timeout", "turn deadline of "+key+" ("+strings.ToUpper(key)+"_TIMEOUT_MS)", func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return fmt.Errorf("want a duration like 10m")
			}
			c.Timeouts[key] = d
			return nil
		})
	}
	return sf
}

// SecretFiles name files that hold secrets.
type SecretFiles struct{ Bearer, RouterKey string }

// Load reads the named files into c.
func (sf *SecretFiles) Load(c *Config) error {
	for _, f := range []struct {
		path string
		dst  *string
	}{{sf.Bearer, &c.Bearer}, {sf.RouterKey, &c.RouterKey}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return fmt.Errorf("read secret file: %w", err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	return nil
}

// ErrNoBearer is returned by Validate for a non-loopback host without a
// bearer token.
var ErrNoBearer = errors.New("refusing to listen on a non-loopback address without a bearer token (set BRIDGE_BEARER)")

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.Bearer == "" && !isLoopback(c.Host) {
		return fmt.Errorf("host %q: %w", c.Host, ErrNoBearer)
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("port %d is out of range", c.Port)
	}
	if len(c.Backends) == 0 {
		return errors.New("no backends: set BRIDGE_BACKENDS")
	}
	if c.RouterCA != "" {
		if !c.ModelRelay {
			return fmt.Errorf("%s needs %s=1: only the model relay uses it", wire.EnvRouterCA, wire.EnvModelRelay)
		}
		if !x509.NewCertPool().AppendCertsFromPEM([]byte(c.RouterCA)) {
			return fmt.Errorf("%s holds no PEM certificate", wire.EnvRouterCA)
		}
	}
	adapters := Adapters()
	for _, k := range c.Backends {
		if _, ok := adapters[k]; !ok {
			return fmt.Errorf("backend %q is unknown (known: %s)", k, strings.Join(slices.Sorted(maps.Keys(adapters)), ", "))
		}
	}
	if c.DataDir == "" {
		return errors.New("no data directory: set BRIDGE_DATA_DIR")
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
