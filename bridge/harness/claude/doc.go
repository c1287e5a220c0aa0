// Package claude is the harness adapter for Claude Code
// (`claude -p --output-format stream-json --verbose
// --include-partial-messages`).
//
// Command: the prompt goes as an argument, or as one stream-json user line
// on stdin when it is large or looks like a flag; stdin is always closed
// once written. A new session gets a fresh --session-id, a continued one
// --resume. The router is wired as ANTHROPIC_BASE_URL plus the router key
// as ANTHROPIC_AUTH_TOKEN; telemetry, auto-update and non-essential traffic
// are off; inherited CLAUDECODE, CLAUDE_CODE_* and ANTHROPIC_* variables
// are dropped; CLAUDE_CONFIG_DIR is the session's private state directory.
//
// Retained sessions (harness.Persistent): one long-lived process per
// session, `--input-format stream-json --permission-prompt-tool stdio`,
// reads one user line per turn and answers it up to that turn's `result`
// line; a turn is cancelled with the stream-json `interrupt` control
// request, after which Claude Code stops the model call or the running
// tool and ends the turn with an error `result`. Permission prompts
// (`control_request` can_use_tool) are questions answered with a
// `control_response`; for parallel tool calls that may run together
// Claude Code asks several at once (ConcurrentQuestions).
//
// Parser: text, thinking and tool-use deltas of the wrapped Anthropic
// stream events become events (text and thinking deltas, nearly all of a
// turn's lines, through a reflection-free path held to the general one by
// a test); a full `assistant` message is used only
// when its stream events were not seen. The served model is reported only
// from `message_start` (the model API's own answer), never from `init`.
// The `result` line ends the turn with measured usage; `is_error` makes it
// an error whatever its subtype says.
package claude
