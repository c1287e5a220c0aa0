package server

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// MetricsContentType is the media type of GET /metrics: the Prometheus
// text exposition format.
const MetricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// metrics serves GET /metrics, the bridge's figures in the Prometheus text
// format. Its only labels are run statuses, harness names and store
// operations: it names no run, session, path or secret.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	st := s.opts.Engine.Store()
	runs, err := st.RunCounts(r.Context())
	if err != nil {
		writeError(w, wire.TypeServerError, err.Error())
		return
	}
	es, ss := s.opts.Engine.Stats(), st.Stats()
	// Every known status and registered harness is listed, zeros too,
	// so that a series exists before its first event.
	for _, status := range []string{store.StatusRunning, store.StatusDone, store.StatusError, store.StatusCancelled} {
		runs[status] += 0
	}
	for _, b := range s.opts.Backends {
		es.SpawnFailures[b.Adapter.Name()] += 0
	}

	var m metricWriter
	m.family("bridge_runs", "gauge", "Runs the store holds (until their identity expires), by status.")
	for _, status := range slices.Sorted(maps.Keys(runs)) {
		m.sample("bridge_runs", `status="`+escapeLabel(status)+`"`, float64(runs[status]))
	}
	m.family("bridge_live_runs", "gauge", "Runs whose harness is running.")
	m.sample("bridge_live_runs", "", float64(es.LiveRuns))
	m.family("bridge_events_appended_total", "counter", "Events committed to the store.")
	m.sample("bridge_events_appended_total", "", float64(ss.EventsAppended))
	m.family("bridge_replay_readers", "gauge", "Open readers of run events (streams and replays).")
	m.sample("bridge_replay_readers", "", float64(es.Readers))
	m.family("bridge_idle_session_processes", "gauge", "Long-lived harness processes of retained sessions waiting for a turn.")
	m.sample("bridge_idle_session_processes", "", float64(es.IdleSessionProcs))
	m.family("bridge_spare_harness_processes", "gauge", "Harness processes started ahead of their turns, waiting for them.")
	m.sample("bridge_spare_harness_processes", "", float64(es.Spares))
	m.family("bridge_spare_turns_total", "counter", "Turns served by a harness process started ahead of them.")
	m.sample("bridge_spare_turns_total", "", float64(es.SpareTurns))
	m.family("bridge_harness_spawn_failures_total", "counter", "Harness processes that could not be started, by harness.")
	for _, h := range slices.Sorted(maps.Keys(es.SpawnFailures)) {
		m.sample("bridge_harness_spawn_failures_total", `harness="`+escapeLabel(h)+`"`, float64(es.SpawnFailures[h]))
	}
	for _, c := range []struct {
		name, help string
		v          int64
	}{
		{"bridge_context_plans_total", "Portable context plans made.", s.counts.plans.Load()},
		{"bridge_context_transfers_total", "Portable context transfers admitted.", s.counts.transfers.Load()},
		{"bridge_context_sessions_total", "Fresh sessions created for context transfers.", s.counts.sessions.Load()},
		{"bridge_native_continuations_total", "Native continuations admitted.", s.continuations.Admitted()},
	} {
		m.family(c.name, "counter", c.help)
		m.sample(c.name, "", float64(c.v))
	}
	m.family("bridge_store_latency_seconds", "histogram", "Store latency: write transactions (the wait for the writer included) and event reads.")
	m.histogram("bridge_store_latency_seconds", `op="write"`, ss.Write)
	m.histogram("bridge_store_latency_seconds", `op="read"`, ss.Read)

	w.Header().Set("Content-Type", MetricsContentType)
	w.Write(m.Bytes())
}

// metricWriter writes the Prometheus text format.
type metricWriter struct{ bytes.Buffer }

func (m *metricWriter) family(name, typ, help string) {
	fmt.Fprintf(m, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (m *metricWriter) sample(name, labels string, v float64) {
	m.WriteString(name)
	if labels != "" {
		m.WriteString("{" + labels + "}")
	}
	m.WriteString(" " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
}

func (m *metricWriter) histogram(name, labels string, l store.Latency) {
	for i, b := range store.LatencyBounds {
		m.sample(name+"_bucket", labels+`,le="`+strconv.FormatFloat(b.Seconds(), 'g', -1, 64)+`"`, float64(l.Buckets[i]))
	}
	m.sample(name+"_bucket", labels+`,le="+Inf"`, float64(l.Count))
	m.sample(name+"_sum", labels, l.Sum.Seconds())
	m.sample(name+"_count", labels, float64(l.Count))
}

// escapeLabel escapes a label value as the text format requires.
func escapeLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}
