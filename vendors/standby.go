package vendors

import "context"

// StandbyPooler is a vendor with warm pools of its own whose boxes run the
// standby bridge (box-bridge --standby) from their start, holding no
// secret: a claim takes one without starting any process in it, and the
// caller then hands the bridge its secrets in one POST /v1/claim
// authenticated by the pool token.
type StandbyPooler interface {
	// ClaimStandby takes a box of the vendor's standby pool of harness
	// for spec, its vendor deadline moved to spec's Lifetime from now, and
	// returns it with the pool token its bridge waits for (a secret). ok
	// is false when the vendor has no pool that serves spec and harness:
	// Create the box instead.
	ClaimStandby(ctx context.Context, spec CreateSpec, harness string) (box Box, token string, ok bool, err error)
}
