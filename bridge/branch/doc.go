// Package branch keeps workspace branches: checkpoints of an ended run's
// workspace and forks of them. A checkpoint copies the workspace the run
// worked in (its session's cwd, else the bridge's working directory) into
// <Dir>/workspaces/checkpoints/<id>; a fork copies a checkpoint into
// <Dir>/workspaces/forks/<id>, a workspace a new session can take as its
// cwd. It is the bridge's side of the workspace routes
// (/v1/workspace/...); the server only decodes their requests and encodes
// the results.
//
// Idempotency: each copy is bound to its request's idempotency key and
// digest in the store (store.Resource) before it is answered. A repeat of
// the request is answered the same copy (replayed), another request under
// the key a conflict, and a repeat of a request whose copy was deleted
// unknown. A checkpoint cannot be deleted while a fork made from it lives;
// a cleanup binds its operation id to its target first, so a repeat of it
// confirms the target absent.
//
// Errors are *wire.ErrorBody values, the answer to send (wire.Fault for a
// failure of the bridge's own). A Manager is safe for concurrent use: the
// store orders what concurrent requests record, and a copy that lost a
// race for its key is removed.
package branch
