package gemini

import "github.com/tangle-network/boxctl/bridge/harness"

var (
	_ harness.Continuer       = Adapter{}
	_ harness.QuestionClaimer = Adapter{}
)

// ContinuesSessions reports true: Command resumes Turn.NativeSessionID.
func (Adapter) ContinuesSessions() bool { return true }

// ClaimsInteractions reports true: a retained turn runs over ACP, where
// the CLI's confirmations (session/request_permission) reach the caller
// as interactions (TestLive_GeminiPermissionInteraction).
func (Adapter) ClaimsInteractions() bool { return true }
