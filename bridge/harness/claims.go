package harness

// Continuer is implemented by adapters whose CLI continues its own
// conversation: a Turn with NativeSessionID set resumes the conversation of
// that id instead of starting a new one. The bridge claims session
// continuation (`sessions.continue`), and with it retained control, only
// for adapters that implement Continuer and answer true; a test checks the
// answer against what Command does with NativeSessionID.
type Continuer interface {
	// ContinuesSessions reports whether Command resumes
	// Turn.NativeSessionID.
	ContinuesSessions() bool
}

// QuestionClaimer is implemented by Retained adapters that say whether
// their questions are proven to reach a caller as interactions. A Retained
// adapter that does not implement it is taken to answer true; one that
// answers false runs retained turns without the bridge claiming
// `interactions` for it.
type QuestionClaimer interface {
	// ClaimsInteractions reports whether the bridge claims interactions
	// for the adapter's retained turns.
	ClaimsInteractions() bool
}

// NativeContinuer is implemented by Retained adapters for which native
// continuation (POST /v1/sessions/:id/continue) is proven: the bridge
// claims `nativeContinuation` and serves the route only for adapters that
// implement it and answer true.
type NativeContinuer interface {
	// ContinuesNatively reports whether the adapter's sessions take
	// native continuations.
	ContinuesNatively() bool
}
