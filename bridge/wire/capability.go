package wire

// The parts of the capability document (GET /v1/capabilities) beyond the
// ones in Capabilities: a bridge claims them only where they work, and a
// client treats an absent block as "not supported".

// NativeContinuationCaps is the `nativeContinuation` block: claimed only
// where POST /v1/sessions/:id/continue admits a turn atomically with the
// context boundary check and repeats the outcome for a repeated request id.
type NativeContinuationCaps struct {
	AtomicBoundary     bool `json:"atomicBoundary"`
	RequestIdempotency bool `json:"requestIdempotency"`
}

// InteractionCaps is the `interactions` block: which interaction kinds a
// harness raises, which answers it takes and how responses behave.
type InteractionCaps struct {
	Kinds               []string `json:"kinds"`
	AnswerFieldTypes    []string `json:"answerFieldTypes"`
	ResponseScopes      []string `json:"responseScopes"`
	SecretAnswers       bool     `json:"secretAnswers"`
	ConcurrentRequests  bool     `json:"concurrentRequests"`
	Replay              bool     `json:"replay"`
	ResponseIdempotency bool     `json:"responseIdempotency"`
}

// ObservationCaps is the `observation` block: which observation surfaces
// carry a value. Compute shape, resource use, compute cost and account
// usage are never known to a bridge that provisions nothing.
type ObservationCaps struct {
	Identity       bool `json:"identity"`
	Lifecycle      bool `json:"lifecycle"`
	Endpoint       bool `json:"endpoint"`
	Placement      bool `json:"placement"`
	Resources      bool `json:"resources"`
	ResourceUse    bool `json:"resourceUse"`
	ModelUsage     bool `json:"modelUsage"`
	ComputeBilling bool `json:"computeBilling"`
	AccountUsage   bool `json:"accountUsage"`
}
