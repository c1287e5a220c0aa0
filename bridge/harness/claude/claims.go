package claude

import "github.com/tangle-network/boxctl/bridge/harness"

var _ harness.Continuer = Adapter{}

// ContinuesSessions reports true: Command resumes Turn.NativeSessionID.
func (Adapter) ContinuesSessions() bool { return true }
