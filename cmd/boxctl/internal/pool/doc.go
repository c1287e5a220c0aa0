// Package pool keeps warm pools of standby boxes (sandbox.Provider
// Standby) on any vendor and claims from them.
//
// A Pool is the keeper of one pool: it boots standby boxes in the
// background up to its size, recycles those older than its maximum age,
// replaces those that vanished or whose bridge stopped answering in
// standby, and stops booting for a while (a breaker) after boxes failed
// to boot several times in a row. Claim takes a box and hands it the
// request's bearer, Router, env, metadata, labels and deadline in one
// request; an empty pool waits (a bounded queue, each claim with its own
// deadline) or falls back to a cold create, by option, and the Outcome
// says which happened. Close drains the pool: its unclaimed boxes are
// destroyed.
//
// The pool's boxes are listed in one file (Dir/<name>.json, 0600, with
// each box's one-time pool token), changed under the file lock of package
// boxstate, so that claims are atomic across processes: Take, which any
// process may call, removes the box it returns from the file before its
// claim, and no two claimers get the same box. A box belongs to its
// keeper's process (vendors/reaper): `boxctl gc` removes a pooled box
// whose keeper is gone, unless a claim recorded it in a state.
//
// A request's repository (sandbox.WorkspaceRepo) is cloned after the
// handover, as a cold create clones it, and one pool serves every
// repository. Pools keyed by repository and ref, whose boxes hold a
// checkout that a claim refreshes with a fetch, would fetch faster than a
// clone (BenchmarkRepoAtClaim in package sandbox measures both), but a
// checkout is the claim's own: a private repository's code, and the
// credentials to fetch it, would be in a pooled box before its claim,
// which holds nothing personal; and each repository and ref would split
// the pool's boxes, so a request for a repository without its own pool
// would miss.
package pool
