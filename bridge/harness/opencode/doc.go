// Package opencode is the harness adapter for opencode (`opencode run
// --format json`, and `-s <session>` to continue).
//
// Model ids are opencode/<provider>/<model>, or opencode/<model> for a
// model of the generic "router" provider. Command: the adapter has the
// engine write an opencode.json in the session's state directory
// (OPENCODE_CONFIG) with an entry for the requested provider whose
// baseURL is the router and whose apiKey is "{env:TANGLE_API_KEY}",
// resolved by opencode from the environment, so the router key is never
// written to a file: "anthropic" and "openai" keep their own SDKs
// (Anthropic Messages, OpenAI Responses), any other provider speaks Chat
// Completions through @ai-sdk/openai-compatible. opencode's sessions live
// in the state directory (XDG_DATA_HOME and XDG_STATE_HOME). A session
// title is always given (--title), which spares opencode the extra model
// call that would generate one. Automatic updates, model catalog fetches,
// LSP downloads and sharing are off; inherited OPENCODE_* variables are
// dropped. The request's effort is the model --variant. `opencode run`
// takes no system prompt, so system messages go before the prompt in a
// <system> block. The prompt goes on stdin, which is then closed: `run`
// quotes every argument that holds a space.
//
// Parser: opencode prints each part once it is complete: `text` and
// `reasoning` parts become text and reasoning (one delta per part),
// `tool_use` a tool call with its result. `step_finish` carries a step's
// measured tokens (opencode splits cached input and reasoning out of
// input and output, so they are added back); the turn ends at the first
// step that did not stop for tool calls, with the usage summed over its
// steps. An `error` line ends the turn with an error.
//
// Served model: opencode's own output never names the model that served
// a request (its events, its session database and its logs hold only the
// requested provider and model), so the adapter has the engine write a
// plugin (servedmodel.js) into the state directory and loads it by its
// file URL from the turn's opencode.json. The plugin wraps opencode's
// fetch and, for each answer of a model API route (messages, responses,
// chat/completions), prints {"type":"boxctl.served_model","model":...}
// from the Openai-Model header or the first "model" field of the body,
// leaving the answer to opencode unchanged; each new served model becomes
// a provider model event.
//
// Any plugin makes opencode wait, before it loads it, for the plugin SDK
// (@opencode-ai/plugin) it installs at start into each configuration
// directory that lacks it; without the npm registry that stalls a turn for
// over a minute. The box image therefore installs the SDK, pinned with
// its tree (pins: the opencode row's "with"), beside opencode in its
// install prefix <BOX_HARNESS_ROOT>/opencode, and in a box the adapter sets
// XDG_CONFIG_HOME to BOX_HARNESS_ROOT: opencode's global configuration
// directory, $XDG_CONFIG_HOME/opencode, is then that prefix, complete, and
// opencode installs nothing. Outside a box image opencode installs the SDK
// itself, once, from the registry.
//
// Retained turns: `opencode run` never waits for an answer (a permission
// that asks is rejected at once), so a retained session runs `opencode
// serve` instead, through a stdio relay that is the bridge's own
// executable (RelayArg, RunRelay; a main that serves the bridge calls
// ServeRelayIfAsked). The relay starts the server on a free loopback port
// with a random password of its own (OPENCODE_SERVER_PASSWORD, basic
// auth), prints each /event frame and each of the server's stdout lines
// (the served-model plugin's) as a line, and turns each request line on
// its stdin ({id, method, path, body}) into an HTTP call whose answer it
// prints ({"type":"boxctl.relay.response", id, status, body}). The
// process's conversation creates the session (POST /session) or continues
// Turn.NativeSessionID, and starts each turn with POST
// /session/{id}/prompt_async; the turn's lines are the server's events
// from the session's going busy on (an aborted turn's last events come
// before). The parser reads completed parts of message.part.updated as
// the matching `run` lines; session.idle ends the turn, session.error ends
// it with an error. The served configuration asks before bash, edit and
// webfetch: each permission.asked becomes a permission interaction naming
// the permission as the tool, its patterns (the command) in the title and
// its metadata as the input; allow replies "once", refuse "reject" with
// the answer's message. An interrupt is POST /session/{id}/abort.
package opencode
