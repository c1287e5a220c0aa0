package engine

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/tangle-network/boxctl/bridge/harness"
)

// Stats is a point-in-time view of an engine, for monitoring.
type Stats struct {
	// LiveRuns is the number of live runs.
	LiveRuns int
	// Readers is the number of open event readers (NewReader, not yet
	// closed), of live and terminal runs.
	Readers int64
	// IdleSessionProcs is the number of long-lived session processes
	// waiting for their session's next turn.
	IdleSessionProcs int
	// Spares is the number of harness processes started ahead of their
	// turns and waiting for them; SpareTurns counts the turns they took
	// since the engine was created (spare.go).
	Spares     int
	SpareTurns int64
	// SpawnFailures counts, by harness name, the harness processes that
	// could not be started since the engine was created.
	SpawnFailures map[string]int64
}

// counters are the engine's monotonic and gauge counters. The zero value
// is ready to use.
type counters struct {
	readers    atomic.Int64
	spareTurns atomic.Int64

	mu            sync.Mutex
	spawnFailures map[string]int64
}

// Stats returns the engine's current figures.
func (e *Engine) Stats() Stats {
	st := Stats{LiveRuns: e.LiveCount(), Readers: e.stats.readers.Load(), SpareTurns: e.stats.spareTurns.Load()}
	e.mu.Lock()
	st.Spares = len(e.spares)
	e.mu.Unlock()
	e.ret.mu.Lock()
	st.IdleSessionProcs = len(e.ret.procs)
	e.ret.mu.Unlock()
	e.stats.mu.Lock()
	st.SpawnFailures = maps.Clone(e.stats.spawnFailures)
	e.stats.mu.Unlock()
	if st.SpawnFailures == nil {
		st.SpawnFailures = map[string]int64{}
	}
	return st
}

// spawn starts a harness process of harnessName (startProcess) and counts
// a failure to start it.
func (e *Engine) spawn(harnessName string, spec harness.Command, marker string) (*process, error) {
	p, err := startProcess(spec, marker)
	if err != nil {
		e.stats.mu.Lock()
		if e.stats.spawnFailures == nil {
			e.stats.spawnFailures = map[string]int64{}
		}
		e.stats.spawnFailures[harnessName]++
		e.stats.mu.Unlock()
	}
	return p, err
}
