package harness

// Persistent is implemented by retained adapters whose CLI serves every
// turn of a session from one long-lived process: the engine starts
// SessionCommand once, writes each turn's TurnInput to its stdin, ends the
// turn at the turn's terminal event, and keeps the process for the next
// turn. A process that died, or was stopped, is replaced by a fresh one
// that resumes Turn.NativeSessionID.
type Persistent interface {
	Retained
	// SessionCommand builds the session's process. t carries no messages;
	// its stdin stays open (HoldStdin) and starts empty.
	SessionCommand(t Turn) (Command, error)
	// TurnInput encodes the stdin line (with its newline) that starts turn
	// t in the live process.
	TurnInput(t Turn) ([]byte, error)
	// Interrupt encodes the stdin line (with its newline) that asks the
	// live process to stop its current turn, which then ends with its
	// terminal event; nil when the CLI has no such request and only
	// ending the process stops a turn.
	Interrupt() []byte
}

// ConcurrentQuestioner is implemented by retained adapters whose CLI can
// ask several questions at once, before any is answered (Claude Code asks
// for each of a reply's parallel tool calls). The bridge claims
// `interactions.concurrentRequests` only for those answering true.
type ConcurrentQuestioner interface {
	ConcurrentQuestions() bool
}

// FeedbackRelayer is implemented by retained adapters whose refusal of a
// tool hands the answer's feedback text to the harness (Claude Code shows
// the model why). Only their permission interactions offer the optional
// feedback field; a harness that takes a bare choice (Pi) gets the grant
// alone.
type FeedbackRelayer interface {
	RelaysFeedback() bool
}

// Steerer is implemented by persistent adapters whose CLI takes more
// input for the turn it is running (POST /v1/sessions/:id/steer).
type Steerer interface {
	// SteerInput encodes the stdin line (with its newline) that hands
	// the live process message while its turn runs.
	SteerInput(message string) ([]byte, error)
}

// Conversation is the client's side of a session process that speaks a
// request-and-response protocol on its stdin and stdout (JSON-RPC, say),
// where what a turn writes depends on what the process answered: one per
// process of a Conversant adapter, kept as long as the process. The
// engine calls it from one goroutine at a time.
type Conversation interface {
	// Open returns what is written to the process's stdin when it
	// starts (the protocol's handshake).
	Open() []byte
	// TurnInput returns what starts turn t in the process: written at
	// once, or nil while the process is not ready for a turn, in which
	// case a later Reply returns it.
	TurnInput(t Turn) ([]byte, error)
	// Reply returns what to write to stdin in answer to an output line
	// (nil for nothing), and whether the line belongs to the running
	// turn: a line that does not (a replayed history, a notice before
	// the turn's input was written) goes to neither the turn's parser nor
	// ParseQuestion.
	Reply(line []byte) (reply []byte, forTurn bool)
	// Interrupt returns what asks the process to stop its running turn,
	// which then ends with its terminal event; nil when the turn cannot
	// be interrupted yet.
	Interrupt() []byte
}

// Conversant is implemented by Persistent adapters whose processes are
// driven through a Conversation: the engine writes Open, the turns'
// TurnInput and Interrupt of the process's conversation instead of the
// adapter's, and every Reply. RetainedCommand's process is driven the
// same way, for its one turn.
type Conversant interface {
	Persistent
	// NewConversation returns the conversation of a process started for
	// t (SessionCommand or RetainedCommand).
	NewConversation(t Turn) Conversation
}

// Prestarter is implemented by adapters whose CLI can start before its
// turn is known and take the turn on stdin: the engine keeps a process
// started ahead (a spare) with a turn's settings, and hands it the next
// turn with the same settings instead of starting one, so that the CLI's
// own start-up is not in the turn's time to its first event.
type Prestarter interface {
	// SpareCommand builds the process of a one-shot turn t started ahead
	// of it: t carries no messages; its stdin stays open (HoldStdin) and
	// starts empty. The process's output is what Command's would be.
	SpareCommand(t Turn) (Command, error)
	// SpareInput encodes what starts turn t in a spare, and whether its
	// stdin stays open after it for the rest of the turn (as Command's
	// HoldStdin) or is closed.
	SpareInput(t Turn) (input []byte, hold bool, err error)
}
