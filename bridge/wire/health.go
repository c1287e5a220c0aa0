package wire

// Health states of one backend.
const (
	BackendReady       = "ready"
	BackendUnavailable = "unavailable"
	BackendError       = "error"
)

// Health is GET /health: status ok (200) when every backend is ready,
// degraded (503) otherwise.
type Health struct {
	Status   string          `json:"status"`
	Backends []BackendHealth `json:"backends"`
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

// Capabilities is GET /v1/capabilities?model=: what this bridge really
// does for one model. Nothing is claimed that does not work.
type Capabilities struct {
	Profile         CapabilityProfile    `json:"profile"`
	Streaming       StreamingCaps        `json:"streaming"`
	Sessions        SessionCaps          `json:"sessions"`
	RetainedControl *RetainedControlCaps `json:"retainedControl,omitempty"`
	Workspace       WorkspaceCaps        `json:"workspace"`
	Branching       BranchingCaps        `json:"branching"`
	Placement       string               `json:"placement"`
	Usage           UsageCaps            `json:"usage"`
}

// CapabilityProfile names the harness and model the document is about.
type CapabilityProfile struct {
	Harness string `json:"harness"`
	Model   string `json:"model"`
	Version string `json:"version,omitempty"`
}

// StreamingCaps are the streaming capabilities.
type StreamingCaps struct {
	Live            bool `json:"live"`
	Replay          bool `json:"replay"`
	Detach          bool `json:"detach"`
	TurnIdempotency bool `json:"turnIdempotency"`
}

// SessionCaps are the session capabilities.
type SessionCaps struct {
	Continue bool `json:"continue"`
	List     bool `json:"list"`
	Messages bool `json:"messages"`
}

// RetainedControlCaps are claimed only all together.
type RetainedControlCaps struct {
	ExactRunIdentity        bool `json:"exactRunIdentity"`
	ResultIdentity          bool `json:"resultIdentity"`
	EventIdentity           bool `json:"eventIdentity"`
	CancellationIdempotency bool `json:"cancellationIdempotency"`
}

// WorkspaceCaps are the workspace capabilities.
type WorkspaceCaps struct {
	Read     bool `json:"read"`
	Write    bool `json:"write"`
	Exec     bool `json:"exec"`
	Git      bool `json:"git"`
	Upload   bool `json:"upload"`
	Download bool `json:"download"`
}

// BranchingCaps are the branching capabilities.
type BranchingCaps struct {
	Checkpoint bool `json:"checkpoint"`
	Fork       bool `json:"fork"`
}

// UsageCaps says what usage the bridge reports.
type UsageCaps struct {
	Measured       bool `json:"measured"`
	ProviderModels bool `json:"providerModels"`
}
