package wire

// Error types of the retained session routes.
const (
	// TypeSessionConflict is a session id reused for a different create
	// request (409).
	TypeSessionConflict = "session_conflict"
	// TypeTurnConflict is a turn id reused for a different turn, or a
	// turn whose run id is already taken (409).
	TypeTurnConflict = "turn_conflict"
	// TypeSessionClosed is a turn for a closed session (409).
	TypeSessionClosed = "session_closed"
)

// RetainedTurnDigestSchema names the canonical form hashed into the
// request digest of a retained turn.
const RetainedTurnDigestSchema = "box-bridge.retained-turn.v1"
