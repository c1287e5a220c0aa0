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
// variables are dropped.
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
// Interactions: the bridge claims none for the Gemini CLI. With a prompt
// (-p) it never asks: outside yolo mode the tools that need a confirmation
// (run_shell_command among them) are not registered at all, and
// the model's call fails with tool_not_registered. The CLI asks only in
// ACP mode (--acp), through session/request_permission, which a retained
// adapter would answer.
package gemini
