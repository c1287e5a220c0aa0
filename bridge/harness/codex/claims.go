package codex

import "github.com/tangle-network/boxctl/bridge/harness"

var (
	_ harness.Continuer       = Adapter{}
	_ harness.QuestionClaimer = Adapter{}
)

// ContinuesSessions reports true: Command resumes Turn.NativeSessionID.
func (Adapter) ContinuesSessions() bool { return true }

// ClaimsInteractions reports true: retained turns run in Codex's
// app-server, whose approval requests reach the caller as interactions
// and take their answers (TestLive_CodexSession).
func (Adapter) ClaimsInteractions() bool { return true }
