package pi

import "github.com/tangle-network/boxctl/bridge/harness"

var (
	_ harness.Continuer       = Adapter{}
	_ harness.QuestionClaimer = Adapter{}
	_ harness.NativeContinuer = Adapter{}
)

// ContinuesSessions reports true: Command resumes Turn.NativeSessionID.
func (Adapter) ContinuesSessions() bool { return true }

// ClaimsInteractions reports true: retained turns load the bridge's
// permission gate, whose questions reach the caller as interactions
// (TestLive_PiPermissionInteraction, both release lines).
func (Adapter) ClaimsInteractions() bool { return true }

// ContinuesNatively reports true: a retained Pi session takes native
// continuations (TestLive_PiNativeContinuation, in provider's tests).
func (Adapter) ContinuesNatively() bool { return true }
