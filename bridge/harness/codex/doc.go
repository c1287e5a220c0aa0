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
// Retained sessions (server.go, serverparse.go) run `codex app-server`
// instead, with the same CODEX_HOME, configuration and environment: `codex
// exec` cannot ask (it runs every turn under approval policy "never"
// whatever the configuration says, and its JSON output has no approval
// event), and the app-server can. The one-shot chat route keeps `codex
// exec`, which needs no conversation with the process. The session's
// process starts with the JSON-RPC handshake (initialize, initialized).
// Each turn writes thread/start for a new session (Codex names the thread
// in its reply, which becomes the native session) or thread/resume of the
// session's thread (which also rejoins a thread the process already
// serves, so a kept process and a fresh one are asked the same); the
// turn's parser sends turn/start once the reply names the thread, and
// later answers any server request the bridge does not serve with an
// error so that Codex never waits on it. Threads run under approval
// policy "untrusted" in the workspace-write sandbox, so every command not
// known to be read-only asks: item/commandExecution/requestApproval
// becomes a permission interaction for tool exec_command (the model
// API's name of Codex's shell tool; the command and its directory as
// input), item/fileChange/requestApproval one for apply_patch, and the
// answer is the request's JSON-RPC response with decision "accept" or
// "decline". The notifications map to events as `codex exec`'s items do:
// message and reasoning deltas, items as tool calls and results (command
// executions named exec_command), model/rerouted as the served model.
// thread/tokenUsage/updated gives the thread's totals and the last
// request's usage: the totals before the turn are those of its first
// count less that count's last request, so the turn's usage needs no
// rollout file. turn/completed ends the turn (interrupted and failed
// turns with an error); a cancel sends turn/interrupt of the running
// turn, which only the process's conversation knows (harness.Conversant),
// and the process serves the next turn.
package codex
