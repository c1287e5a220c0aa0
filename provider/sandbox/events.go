package sandbox

import (
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox/broker"
	"github.com/tangle-network/boxctl/provider/sandbox/webhook"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// EventType names a box's lifecycle event.
type EventType string

// The lifecycle events, in the order a box goes through them.
const (
	// EventCreated: the vendor made the box (the bridge is not up yet).
	EventCreated EventType = "created"
	// EventClaimed: a pooled box was claimed; its standby bridge took
	// the claim's secrets (Provider.Claim).
	EventClaimed EventType = "claimed"
	// EventReady: the bridge answers and the environment is attached.
	EventReady EventType = "ready"
	// EventTurnStarted: a turn was sent to the box.
	EventTurnStarted EventType = "turn.started"
	// EventTurnEnded: a turn ended; Reason is its outcome.
	EventTurnEnded EventType = "turn.ended"
	// EventDestroyed: the box is gone; Reason says why.
	EventDestroyed EventType = "destroyed"
)

// Reasons of EventDestroyed.
const (
	// ReasonUser: its user destroyed it.
	ReasonUser = "user"
	// ReasonDeadline: it was past its deadline.
	ReasonDeadline = "deadline"
	// ReasonGC: gc found it orphaned (its owner gone, or forgotten).
	ReasonGC = "gc"
	// ReasonFailure: its create failed after the vendor made it.
	ReasonFailure = "failure"
)

// Event is one lifecycle event of a box, as Options.OnEvent receives it
// and `boxctl events` prints it (one JSON object a line).
type Event struct {
	Time   time.Time `json:"time"`
	Type   EventType `json:"type"`
	Vendor string    `json:"vendor"`
	BoxID  string    `json:"boxId"`
	RunTag string    `json:"runTag,omitempty"`
	// Reason says why the box was destroyed (ReasonUser, ...), or how a
	// turn ended (completed, failed, cancelled, error).
	Reason string `json:"reason,omitempty"`
	// RunID is a turn's bridge run.
	RunID string `json:"runId,omitempty"`
	// Detail is the error of a failure (never a secret).
	Detail string `json:"detail,omitempty"`
	// Usage is, on a turn's end, what the broker measured the turn spend:
	// its model requests and the tokens the upstream said they took (nil
	// without a broker).
	Usage *broker.Usage `json:"usage,omitempty"`
}

// emit hands ev to the OnEvent callback and the Webhooks, stamped now.
func (p *Provider) emit(ev Event) {
	if p.o.OnEvent == nil && p.o.Webhooks == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if ev.Vendor == "" {
		ev.Vendor = p.o.Vendor.Name()
	}
	if p.o.OnEvent != nil {
		p.o.OnEvent(ev)
	}
	if p.o.Webhooks != nil {
		p.o.Webhooks.Record(WebhookEvent(ev))
	}
}

// WebhookEvent is ev as a webhook.Sender delivers it: its type and time,
// and ev itself as the data. A caller that composes its own OnEvent (or
// IdleOptions.OnEvent) sends this.
func WebhookEvent(ev Event) webhook.Event {
	return webhook.Event{Type: string(ev.Type), Time: ev.Time, Data: ev}
}

// GCEvent is the destroyed event of a box that GC (the reaper) removed
// for reason (reaper.ReasonExpired, ...): ReasonDeadline for an expired
// box, ReasonGC for an orphan; the reaper's words go into Detail.
func GCEvent(vendor, boxID, runTag, reason string) Event {
	r := ReasonGC
	if reason == reaper.ReasonExpired {
		r = ReasonDeadline
	}
	return Event{Time: time.Now().UTC(), Type: EventDestroyed, Vendor: vendor, BoxID: boxID, RunTag: runTag, Reason: r, Detail: reason}
}
