package pi

import "github.com/tangle-network/boxctl/bridge/harness"

var (
	_ harness.Continuer       = Adapter{}
	_ harness.QuestionClaimer = Adapter{}
	_ harness.NativeContinuer = Adapter{}
)

// ContinuesSessions reports true: Command resumes Turn.NativeSessionID.
func (Adapter) ContinuesSessions() bool { return true }

// ClaimsInteractions reports false: Pi asks questions only through
// extensions, and no live test proves them yet.
func (Adapter) ClaimsInteractions() bool { return false }

// ContinuesNatively reports true: a retained Pi session takes native
// continuations (TestLive_PiNativeContinuation).
func (Adapter) ContinuesNatively() bool { return true }
