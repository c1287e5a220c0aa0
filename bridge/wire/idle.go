package wire

// Idle is how long the bridge has had no turn: no live run and no
// attached stream. Only turns move it (a run's start and end, a stream's
// attach and detach, an admitted session turn); GET /health and every
// other read leave it alone, so a box polled for its health still goes
// idle. A bridge that just started counts from its start.
type Idle struct {
	// IdleMS is the time since the last turn activity, in milliseconds; 0
	// while a run is live or a stream attached.
	IdleMS int64 `json:"idle_ms"`
	// LiveRuns is the number of live runs.
	LiveRuns int `json:"live_runs"`
	// Streams is the number of attached event streams and turn requests
	// in flight.
	Streams int `json:"streams"`
	// Since is when the bridge became idle (Unix ms); 0 while busy.
	Since int64 `json:"since,omitempty"`
}
