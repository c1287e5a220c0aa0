// Package portable carries a conversation from one environment to another
// as a portable context: a source's messages, their parts and attachments,
// bound by a digest. It is the bridge's side of the context routes
// (/v1/context/...); the server only decodes their requests and encodes
// the results.
//
// A plan (Plan) has no effect: it decides what of a source can travel
// (text, file and image input parts with only their own fields; a message
// with no such part is omitted), estimates the tokens of what travels and
// holds it to the caller's budget. A transfer (Transfer) takes an
// accepted plan, checks that its context is what its decisions make of its
// source, and sends it to one fresh retained session, opened for the
// operation, whose first run carries the conversation as its prompt
// (Render). The transfer is recorded under its operation id: a repeat of
// it is answered the recorded receipt, another request under the id a
// conflict.
//
// Errors are *wire.ErrorBody values, the answer to send (wire.Fault for a
// failure of the bridge's own), or what the Admit of a transfer returned.
// The functions keep no state; the store orders concurrent transfers.
package portable
