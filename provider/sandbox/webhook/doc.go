// Package webhook delivers events to HTTP endpoints, at least once, from
// a durable outbox: the lifecycle events of boxes (sandbox.Options.Webhooks
// takes a Sender), or any others.
//
// # Wire format
//
// Each delivery is a POST of one JSON object (Message): the event's id,
// its type, its time and the event itself under "data" (for a lifecycle
// event, the sandbox.Event as `boxctl events` prints it). It carries the
// three headers of the Standard Webhooks specification, which receivers
// already have verifiers for:
//
//	webhook-id:        evt_<32 hex>            (the same on every retry)
//	webhook-timestamp: <unix seconds>          (when this attempt was signed)
//	webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>
//
// The HMAC key is the endpoint's secret, "whsec_" followed by base64
// (NewSecret makes one). Like Stripe's Stripe-Signature (t=, v1= over
// "timestamp.body"), the timestamp is signed so a receiver refuses a
// replayed request outside its tolerance; unlike it, the id is signed
// too, so a duplicate cannot be passed off under another id. GitHub's
// X-Hub-Signature-256 signs the body only and has no replay window.
// Receivers call Verify, or any Standard Webhooks library, and
// de-duplicate on the id.
//
// # Outbox
//
// The outbox is one SQLite file (WAL): Sender.Send commits an event's
// deliveries, synced to the disk (synchronous=FULL), before it returns, so
// an event recorded is lost neither to a crash of the process nor to a
// power cut. What attempts write (outcomes, leases) is committed with
// synchronous=NORMAL: a power cut may lose the last of them, which costs
// a duplicate, never an event. SQLite rather than an
// append-only log because a delivery changes state (attempts, next
// attempt, done) and several processes may add to and drain one outbox at
// once: its transactions and locks give that without a compaction or a
// lock protocol of our own.
//
// # Delivery
//
// A Sender attempts up to Options.Concurrency deliveries at once, each
// under a lease in the outbox (Options.Timeout plus a margin), so that two
// Senders on one outbox, in one process or several, do not attempt the
// same delivery together and a Sender that stopped without Close leaves
// its attempts to whoever opens the outbox next once their lease ends. A
// 2xx answer delivers; anything else, or no answer, is retried after an
// exponential back-off from MinBackoff doubling to MaxBackoff, each wait
// drawn uniformly from its upper half, and not shorter than a Retry-After
// the endpoint gave (within MaxBackoff). A delivery still failing after
// MaxAge is abandoned: it stays in the outbox, marked, and counts in
// Stats. There is no order between deliveries, to one endpoint or
// several: receivers order by the event's time.
//
// A Sender delivers only to the endpoints it was given (their secrets are
// in its memory only, never in the outbox): a delivery to an endpoint
// another Sender added waits for a Sender that has that endpoint.
//
// Flush delivers until nothing is pending, waiting out the back-off of
// failed deliveries. Close makes the attempts that are due, gives back
// the leases of those its context cut short, and leaves the rest in the
// outbox for the next Sender. Add puts deliveries in an outbox
// without sending, for a process that does not hold the secrets or does
// not live long enough: a Sender opened later delivers them. Stats and Metrics report what this
// Sender did and what the outbox holds.
//
// Endpoint URLs may carry a token of their own (some hooks do): logs,
// errors and the outbox's last error name an endpoint by its scheme and
// host only.
package webhook
