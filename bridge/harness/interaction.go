package harness

import "encoding/json"

// Question is something a harness asked mid-turn and waits on, such as a
// permission prompt before it runs a tool.
type Question struct {
	// NativeID is the harness's own id of the request, echoed in the
	// answer.
	NativeID string
	// Kind is the interaction kind ("permission").
	Kind string
	// Tool and Input name the tool the harness wants to run and its
	// arguments (a JSON object).
	Tool  string
	Input json.RawMessage
	// Title is a one-line description for a person.
	Title string
	// Options are the choices of a question answered by naming one (the
	// first allows, the last refuses); none for a yes/no question.
	Options []string
}

// Retained is implemented by adapters that run the turns of retained
// native sessions with their questions answered over stdin.
type Retained interface {
	// RetainedCommand builds the process of one retained turn. Its
	// stdin stays open (HoldStdin) so that answers can be written to it,
	// until the turn's terminal event was parsed.
	RetainedCommand(t Turn) (Command, error)
	// ParseQuestion reports whether an output line is a question, and
	// decodes it.
	ParseQuestion(line []byte) (Question, bool)
	// Answer encodes the stdin line (with its newline) that answers q:
	// allow runs the tool, otherwise message says why it was refused.
	Answer(q Question, allow bool, message string) ([]byte, error)
}
