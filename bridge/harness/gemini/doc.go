// Package gemini is the harness adapter for the Gemini CLI (`gemini -o
// stream-json --prompt=...`, and --resume <session> to continue).
//
// Command: GEMINI_CLI_HOME is the session's private state directory, where
// the adapter has the engine write .gemini/settings.json selecting Gemini
// API key authentication, with telemetry, usage statistics and
// auto-update off. GOOGLE_GEMINI_BASE_URL is the router (the CLI calls
// {base}/v1beta/models/{model}:streamGenerateContent?alt=sse) and
// GEMINI_API_KEY the router key, which the CLI sends as x-goog-api-key.
// The working directory is trusted (GEMINI_CLI_TRUST_WORKSPACE), tools
// run without confirmation (--approval-mode yolo), a new session gets a
// fresh --session-id. The prompt goes on stdin with an empty --prompt=,
// which the CLI appends to it: no size limit and no flag parsing. The CLI
// takes no system prompt to append to, so system messages go before the
// prompt in a <system> block; it has no flag for the request's effort.
// Inherited GEMINI_*, GOOGLE_GEMINI_*, GOOGLE_GENAI_* and GOOGLE_API_KEY
// variables are dropped. GEMINI_CLI_NO_RELAUNCH keeps the CLI (and its
// `--version` probe) in one process instead of a parent that starts a
// second one with a larger heap.
//
// Parser: `init` names the session; assistant `message` deltas become
// text; `tool_use` and `tool_result` become a tool call and its result;
// `error` lines are warnings (the parser's Diagnosis); `result` ends the
// turn, with the measured usage of its `stats` on success and its error
// otherwise. The CLI keys its per-model stats by the model the response
// named (modelVersion), or by the requested model when the response named
// none: so a key is reported as a served model only on success and when
// it differs from the requested model.
//
// Retained sessions (harness.Conversant): one `gemini --acp` process per
// session speaks the Agent Client Protocol (JSON-RPC) on stdin and
// stdout, with Command's environment and settings and -m for the model;
// the CLI's own approval mode applies ("default": tools that change
// something ask). Its conversation sends initialize, then session/new
// (whose answer names the session) or, for a process resuming the
// session, session/load, and each turn's session/prompt once the session
// is ready: after session/load, once the CLI announced the session's
// commands, which it does after replaying the history (the replayed
// notifications are not the turn's). The CLI's session/request_permission
// requests are the questions: the interaction names the tool by the
// call's id (`<tool>__<id>`) and the title the CLI gives (the command of
// a shell call); the request carries no tool input. They are answered
// with the request's allow-once or reject-once option. A cancel sends
// session/cancel, and answers the turn's permission requests as
// cancelled; the CLI then answers the prompt with stopReason "cancelled"
// and the process serves the next turn.
//
// ACP parser: message and thought chunks become text and reasoning; a tool
// call, or the first update of a call that asked first (the CLI announces
// those only by the permission request), becomes a tool call without
// arguments (the protocol has none), and its completed or failed update
// its result; the prompt's answer ends the turn with its stop reason and
// the measured input and output tokens of its `_meta.quota` (cached
// tokens are not reported there). The protocol names only the model the
// CLI asked for (model_usage), never the one that served it, so the
// process preloads served-model.mjs (NODE_OPTIONS --import), which reads
// modelVersion from each Generative Language API answer and prints it as
// a line of its own; each served model is reported once per turn.
//
// Two behaviours of Gemini CLI 0.61.0 are worked around. Its session/load
// starts recording the session anew, in a file named after the current
// minute and the id's first eight characters, before it reads the
// history: in the minute the session was created that is the file with
// the history, so the conversation first gives that file an earlier
// minute's name. And its session cleanup, at every start, deletes every
// file of a session one of whose files holds no conversation (which
// session/load leaves): settings.json turns the cleanup off.
//
// Interactions are claimed (ClaimsInteractions). A one-shot turn (-p)
// never asks: outside yolo mode the tools that need a confirmation are not
// registered at all.
package gemini
