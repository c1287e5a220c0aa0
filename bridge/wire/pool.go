package wire

import (
	"fmt"
	"log/slog"
)

// Pooled bridges. A bridge started in standby (`box-bridge --standby`)
// waits in a warm pool: it answers GET /health (Health.Standby set) and
// POST /v1/claim, authenticated by the one-time pool token it read on its
// standard input; every other route answers TypeStandby until the claim.
// The claim hands it, in one request, everything personal: the bearer,
// the model Router and the harness environment.
const (
	// PathClaim is the claim route.
	PathClaim = "/v1/claim"
	// HealthStandby is Health.Status of a pooled bridge whose backends
	// are ready.
	HealthStandby = "standby"
	// EnvDeadlineFile names the file the bridge writes the claimed box's
	// deadline to (Unix seconds), which the box's init watches; unset, a
	// claim's deadline moves nothing in the box.
	EnvDeadlineFile = "BRIDGE_DEADLINE_FILE"
	// EnvPrestartCwd is the working directory of the first turn a bridge
	// serving one harness expects: set, the bridge starts that harness
	// ahead of it (where the harness can take a turn so) as soon as it
	// serves; unset, only after a first turn.
	EnvPrestartCwd = "BRIDGE_PRESTART_CWD"
	// EnvPrestartModel is the model of that first turn, as a turn's route
	// names it after the harness ("sonnet" of "claude-code/sonnet"); unset
	// or empty, the harness's default.
	EnvPrestartModel = "BRIDGE_PRESTART_MODEL"
	// EnvModelRelay, "1", points the harnesses at the bridge's own model
	// endpoint on loopback, which presents the box's model token for them:
	// no harness holds the token, and a pooled bridge starts its harness
	// ahead of the claim that brings the token.
	EnvModelRelay = "BRIDGE_MODEL_RELAY"
	// EnvRouterCA holds PEM certificates the model relay trusts, beside
	// the system's, for an https model endpoint (a broker whose
	// certificate a private authority signed). It needs EnvModelRelay.
	EnvRouterCA = "BRIDGE_ROUTER_CA"
)

// Error types of pooled bridges.
const (
	// TypeStandby is a route other than /health and the claim on a bridge
	// that waits in a pool (503).
	TypeStandby = "bridge_standby"
	// TypeAlreadyClaimed is a claim of a bridge already claimed, or
	// started out of a pool (409).
	TypeAlreadyClaimed = "already_claimed"
)

// BearerLen is the length of a claim's bearer: 256 bits, hex encoded.
const BearerLen = 64

// Claim is the body of POST /v1/claim, sent with the pool token as its
// bearer. Bearer, RouterKey and Env values are secrets: String, Format and
// LogValue print none of them.
type Claim struct {
	// Bearer is the box's bearer from now on: BearerLen hex digits.
	Bearer string `json:"bearer"`
	// RouterURL and RouterKey are the model Router the harnesses use.
	RouterURL string `json:"router_url"`
	RouterKey string `json:"router_key"`
	// Env is added to every harness's environment.
	Env map[string]string `json:"env,omitempty"`
	// Metadata and Labels describe the claimer's use of the box; the
	// answer repeats the labels.
	Metadata map[string]any    `json:"metadata,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Deadline is the box's end, Unix seconds.
	Deadline int64 `json:"deadline"`
}

// String names the claim's router and deadline, no secret.
func (c Claim) String() string {
	return fmt.Sprintf("claim(router %s, %d env, deadline %d)", c.RouterURL, len(c.Env), c.Deadline)
}

// GoString keeps %#v from printing a secret.
func (c Claim) GoString() string { return c.String() }

// Format keeps every fmt verb from printing a secret.
func (c Claim) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue keeps a log record from holding a secret.
func (c Claim) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Claimed answers a claim.
type Claimed struct {
	Status   string            `json:"status"`
	Deadline int64             `json:"deadline"`
	Labels   map[string]string `json:"labels,omitempty"`
}
