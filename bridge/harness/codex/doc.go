// Package codex is the harness adapter for the Codex CLI (`codex exec
// --json`, and `codex exec resume <thread_id> --json` to continue).
//
// Command: CODEX_HOME is the session's private state directory, where the
// adapter has the engine write a config.toml whose model provider
// "router" points at the router's Responses API (base_url <router>/v1,
// wire_api "responses") and takes its key from the TANGLE_API_KEY variable
// (env_key), which the adapter sets to the router key; the key is never
// written to a file. Commands run in the workspace-write sandbox without
// approval prompts. stdin is /dev/null (Codex waits on an open stdin),
// except that a prompt too large for an argument is given on stdin with
// "-". System messages become the turn's developer_instructions. Inherited
// OPENAI_* and CODEX_* variables are dropped.
//
// Parser: `thread.started` names the native session; agent messages and
// reasoning become text and reasoning (Codex reports them whole, or as
// updates of which only the new suffix is reported); command executions,
// file changes, MCP and web-search calls become tool calls and results.
// `turn.completed` ends the turn. Its usage counters are cumulative over
// the thread, resumes included, so the per-turn usage is the difference
// from the totals Codex recorded in the thread's rollout file before the
// turn; when that baseline cannot be read for a resumed thread, the usage
// is left unknown. Codex reads the served model from the model API's
// Openai-Model response header and says nothing when it is the requested
// model; when it differs, Codex reports a warning item "model rerouted:
// <requested> -> <served> (<reason>)", whose served model is reported.
// `turn.failed` ends the turn with an
// error. Codex retries an unreachable endpoint forever with
// `{"type":"error","message":"Reconnecting..."}` lines: those never end the
// turn; the engine's run deadline does, and the last of them is the
// parser's Diagnosis.
//
// Interactions: the bridge claims none for Codex. `codex exec` cannot ask:
// it runs every turn under approval policy "never" whatever the
// configuration says (an escalation the model requests is refused with
// "approval policy is Never"), and its JSON output has no approval event.
// Codex asks only through `codex app-server`, whose JSON-RPC server
// requests (item/commandExecution/requestApproval,
// item/fileChange/requestApproval) a retained adapter would answer.
package codex
