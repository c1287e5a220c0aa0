// Package routerstub is a local model endpoint that stands in for the model
// Router in tests and offline runs. It speaks the wire of four model APIs,
// streaming and not:
//
//   - the Anthropic Messages API: POST /v1/messages (any query, such as
//     Claude Code's ?beta=true) and POST /v1/messages/count_tokens;
//   - the OpenAI Responses API: POST /v1/responses and POST /responses;
//   - the OpenAI Chat Completions API: POST /v1/chat/completions and
//     POST /chat/completions;
//   - Google's Generative Language API (Gemini): POST
//     /v1beta/models/{model}:generateContent, :streamGenerateContent
//     (?alt=sse) and :countTokens, keyed by x-goog-api-key or ?key=.
//
// Every answer is scripted: a Script picks a Reply per request (Queue is the
// usual one), and the Reply is rendered in the shape of the family the
// request came in on: text in one or many deltas, thinking, tool calls, an
// error in the family's error shape, a delay, or a stall that holds the
// connection until the client goes away. Every answer names the model that
// served it (by default the requested one; see Options.ServedModel), and its
// token usage is derived from byte lengths so tests can assert it end to end.
//
// Every request, authorized or not and on any path, is recorded (method,
// path, query, model, stream flag, which header carried the key and the key
// itself, body, status, usage); Requests returns a copy. Requests without an
// accepted key are answered 401 in the real APIs' shapes. Unknown paths are
// answered 404 in JSON. The key is never logged.
//
// A Server is configured by an Options struct, as our own components are;
// functional options are for the clients of outside APIs.
//
// Concurrency: a Server serves any number of requests at once. The request
// log is guarded by one mutex; the Script must be safe for concurrent use
// (Queue is). Serve owns its http.Server and stops it when its context ends.
package routerstub
