// Package boxstate is the per-user box state file: the boxes `boxctl up`
// made (with what a later command needs to drive them again, the bearer
// included) and the image of the last `boxctl build`.
//
// A Store is one state file. Update runs a change under an exclusive
// flock of a lock file beside it, then replaces the file atomically
// (a synced 0600 temporary file renamed over it, in a 0700 directory), so
// that concurrent processes never lose each other's changes and a reader
// (Load, which takes no lock) always sees one whole version. The format
// is versioned; a newer one is refused.
//
// On top of the store: Resolve finds a box by id, unique id prefix or
// "last"; Create records a box by run tag before it exists, creates it,
// and rolls the record back when the create fails; Collect reconciles
// the state with a vendor through the reaper (vendors/reaper).
//
// Record appends a box's lifecycle event to the event log beside the
// state file (Events) and, when the box has webhooks (up --webhook), adds
// its deliveries to the webhook outbox beside it (WebhooksPath,
// provider/sandbox/webhook) for a process holding the secret to deliver.
//
// Open takes an Options struct (our own component).
package boxstate
