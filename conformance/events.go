package conformance

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tangle-network/boxctl/provider"
)

// withIDs keeps the events that carry a replay cursor (the sandbox
// provider's execution.started opener carries none).
func withIDs(evs []provider.Event) []provider.Event {
	var out []provider.Event
	for _, ev := range evs {
		if ev.ID != "" {
			out = append(out, ev)
		}
	}
	return out
}

// listEvents renders events as "id type" pairs for evidence, the first
// and last ones when there are many.
func listEvents(evs []provider.Event) string {
	if len(evs) == 0 {
		return "no events"
	}
	var parts []string
	for i, ev := range evs {
		if len(evs) > 24 && i == 12 {
			parts = append(parts, fmt.Sprintf("... %d more ...", len(evs)-24))
		}
		if len(evs) > 24 && i >= 12 && i < len(evs)-12 {
			continue
		}
		parts = append(parts, ev.ID+" "+ev.Type)
	}
	return fmt.Sprintf("%d events [%s]", len(evs), strings.Join(parts, ", "))
}

// diffEvents compares two event sequences by cursor and type (and raw
// content when raw is set) and describes the first difference, or
// returns "".
func diffEvents(got, want []provider.Event, raw bool) string {
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Type != w.Type {
			return fmt.Sprintf("event %d is %s %s, want %s %s", i, g.ID, g.Type, w.ID, w.Type)
		}
		if raw && !bytes.Equal(g.Raw, w.Raw) {
			return fmt.Sprintf("event %d (%s) carries %s, want %s", i, g.ID, clip(string(g.Raw), 200), clip(string(w.Raw), 200))
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d events, want %d", len(got), len(want))
	}
	return ""
}

// duplicateID returns an id that two events share, or "".
func duplicateID(evs []provider.Event) string {
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.ID] {
			return ev.ID
		}
		seen[ev.ID] = true
	}
	return ""
}

// completed reports a terminal event of a completed turn: the result
// (legacy streams) or a completed status (canonical ones).
func completed(ev provider.Event) bool {
	return (ev.Type == provider.EventResult && (ev.Status == "" || ev.Status == provider.StatusCompleted)) ||
		(ev.Type == provider.EventStatus && ev.Status == provider.StatusCompleted)
}
