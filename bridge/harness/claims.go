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
