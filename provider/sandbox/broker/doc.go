// Package broker keeps model credentials out of boxes. A Broker is an
// HTTP proxy, outside every box, for the model APIs the harnesses speak
// (Anthropic Messages, OpenAI Chat Completions and Responses, Gemini):
// a box holds only a box token, random and bound to that box; the broker
// swaps it for the real credential of the box's upstream and forwards the
// request, streaming the answer back unchanged.
//
// # Tokens
//
// Grant issues a box's token (a second Grant of the same box rotates it:
// the old one is refused from then on); Bind, or the grant's Source, ties
// it to the address the box's requests come from, where the vendor lets
// the broker tell boxes apart (Docker, Kubernetes); Revoke retires it when the box is gone. The
// broker keeps only tokens' SHA-256 digests. A refused request gets the
// status and error body of the API family it called (401, 403 or 429),
// its reason in the X-Boxctl-Broker-Refusal header (a Refusal), and is
// counted by reason (Refusals); a token is worth nothing on any route but
// the model APIs.
//
// # Upstreams
//
// An Upstream is a base URL and a credential that lives in the broker's
// memory only: its String, LogValue and JSON forms never show the key.
// The Router (TANGLE_ROUTER_URL, TANGLE_API_KEY) takes the key in the
// header the harness used; the providers' own APIs take theirs
// (Anthropic x-api-key, OpenAI Authorization: Bearer, Gemini
// x-goog-api-key).
//
// # Usage
//
// The broker reads token usage and the served model from the upstream's
// answers, streamed or not, and adds them up per box (Usage): a box
// cannot under-report what it spent. A Grant's Budget (tokens or
// requests) answers the harness with the provider's own rate-limit error
// once spent.
//
// # Serving
//
// A Broker is an http.Handler for boxes. Admin serves Grant, Bind, Revoke
// and Usage over HTTP for a broker in another process (on a unix socket
// only its user reaches), and Client is the caller's side of it; both a
// Broker and a Client satisfy Granter.
package broker
