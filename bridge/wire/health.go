package wire

// Health states of one backend.
const (
	BackendReady       = "ready"
	BackendUnavailable = "unavailable"
	BackendError       = "error"
)

// HealthCrashLoop is the Health status a box's bridge supervisor answers
// (503) once the serving bridge kept crashing and is no longer restarted;
// each backend is then BackendError with the reason as its detail.
const HealthCrashLoop = "crash_loop"

// Health is GET /health: status ok (200) when every backend is ready,
// degraded (503) otherwise; a pooled bridge says standby (HealthStandby)
// instead of ok, with Standby set; a supervisor that gave up restarting the
// bridge says HealthCrashLoop (503).
type Health struct {
	Status   string          `json:"status"`
	Backends []BackendHealth `json:"backends"`
	Standby  bool            `json:"standby,omitempty"`
	// Idle is how long the bridge has had no turn (Idle).
	Idle *Idle `json:"idle,omitempty"`
}

// BackendHealth is the readiness of one harness. ProbedAt is Unix ms.
type BackendHealth struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Detail   string `json:"detail"`
	Version  string `json:"version,omitempty"`
	ProbedAt int64  `json:"probed_at"`
	Cached   bool   `json:"cached"`
}

// Root is GET /.
type Root struct {
	Name         string         `json:"name"`
	Version      string         `json:"version"`
	Scheme       string         `json:"scheme"`
	Capabilities map[string]any `json:"capabilities"`
	Backends     []string       `json:"backends"`
	Endpoints    []string       `json:"endpoints"`
}

// ModelList is GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one model id, `<harness>/<model>`.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
