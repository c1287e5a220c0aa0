// Package pi is the harness adapter for the Pi coding agent (`pi --mode
// rpc`), both the 0.73 releases (@mariozechner/pi-coding-agent) and the
// 1.x ones (@earendil-works/pi-coding-agent).
//
// Model ids are pi/<provider>/<model>: the bare model is "provider/model".
// Command: PI_CODING_AGENT_DIR is a private directory inside the session's
// state directory, where the adapter has the engine write a models.json
// whose entry for the requested provider points at the router (Anthropic
// Messages for "anthropic", OpenAI Responses for "openai", Chat
// Completions for any other) with the requested model. Its apiKey is the
// command "!printenv TANGLE_API_KEY", which both release lines resolve at
// request time (0.73 reads a bare name as a variable, 1.x only "$NAME"), so
// the router key lives only in the process environment. On stdin go a
// `prompt` command and a `get_state` command (whose answer names the
// session); stdin stays open until the turn ends, because Pi's rpc mode
// quits at the end of its input. A continued session is opened with
// --session <id>. System messages are appended to Pi's system prompt, the
// request's effort becomes --thinking. Inherited PI_* variables are
// dropped; startup network traffic and telemetry are off.
//
// Retained sessions (harness.Persistent): one long-lived rpc process
// serves every turn of a session. Each turn writes a `prompt` and a
// `get_state` command to its stdin and ends at the turn's end event; a
// cancel writes an rpc `abort`, after which Pi ends the turn as aborted
// and the process stays for the next turn. A process that died, idled
// out, or was killed is replaced by a fresh one resuming the session's
// native conversation (--session); with the engine's session processes
// off, each turn is such a fresh process.
//
// Interactions: Pi has no permission prompts of its own. A retained turn's
// process loads the bridge's permission gate (permissions.ts, written into
// the private agent directory and named by --extension, so one-shot runs
// never load it): before any tool other than read, grep, find and ls runs,
// it asks in the TypeScript cli-bridge's protocol: an rpc `select` of
// allow_once or deny, titled "Permission: <tool> <input JSON>" and ended by
// a marker of the session's nonce and the question's number, then a
// notify of the choice it applied. ParseQuestion turns that
// `extension_ui_request` into a permission question about the tool, and
// Answer sends the `extension_ui_response` with the chosen `value`; a
// refused call is blocked and Pi tells the model so. The answer carries no
// message, so Pi's interactions offer the grant field alone. The gate passes the turn's
// abort signal to the dialog, so a cancelled turn dismisses it (the call
// is blocked) and Pi's process stays for the next turn. Confirm dialogs of
// other extensions are permission questions without a tool. Pi asks one
// question at a time (its tool_call handlers run in turn), so concurrent
// requests are not claimed; interactions and native continuation are.
//
// Parser: 0.73 sends, with every `message_update`, the whole partial
// message so far (`message`, and `partial` in the event), sometimes ahead
// of the event's own delta; 1.x sends only deltas. The parser keeps, per
// content block of the current assistant message, how much text it has
// reported, and reports only what a snapshot adds (0.73) or the deltas
// (1.x), then whatever `message_end` adds beyond that. A tool call is
// reported whole at `toolcall_end`, its result at `tool_execution_end`.
// `message_end` of an assistant message names the served model
// (`responseModel`, the model API's own answer) and carries its measured
// usage; the turn's usage is the sum over its assistant messages. The turn
// ends at 1.x's `agent_settled`, or at an `agent_end` of 0.73 (which has
// no willRetry field); a 1.x `agent_end` that will be retried does not end
// it. The turn failed when its last assistant message stopped with an
// error or was aborted, or when Pi refused the prompt.
package pi
