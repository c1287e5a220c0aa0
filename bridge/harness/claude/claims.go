package claude

import "github.com/tangle-network/boxctl/bridge/harness"

var _ harness.Continuer = Adapter{}

// ContinuesSessions reports true: Command resumes Turn.NativeSessionID.
func (Adapter) ContinuesSessions() bool { return true }

var _ harness.ConcurrentQuestioner = Adapter{}

// ConcurrentQuestions reports true: for a reply with parallel tool calls
// that may run together (two Reads outside the working directory), Claude
// Code asks for each permission before any is answered.
func (Adapter) ConcurrentQuestions() bool { return true }
