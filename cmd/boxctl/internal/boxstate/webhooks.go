package boxstate

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/provider/sandbox/webhook"
)

// WebhooksPath is the webhook outbox beside the state file (boxes.json ->
// boxes.webhooks.db, mode 0600): the deliveries of the boxes' lifecycle
// events to their webhooks (Record.Webhooks), kept until delivered, by
// whichever boxctl process holds the endpoints' secret.
func (s *Store) WebhooksPath() string {
	return strings.TrimSuffix(s.path, filepath.Ext(s.path)) + ".webhooks.db"
}

// queueWebhooks adds ev's deliveries to the webhooks of its box, as st
// (nil: the state now) records them; a failure is logged.
func (s *Store) queueWebhooks(st *State, ev sandbox.Event) {
	if st == nil {
		var err error
		if st, err = s.Load(); err != nil {
			s.log.Warn("webhooks of event", "type", ev.Type, "err", err)
			return
		}
	}
	urls := st.webhooksOf(ev)
	if len(urls) == 0 {
		return
	}
	if _, err := webhook.Add(context.Background(), s.WebhooksPath(), sandbox.WebhookEvent(ev), urls...); err != nil {
		s.log.Warn("queue webhooks", "type", ev.Type, "err", err)
	}
}

// webhooksOf are the webhooks of ev's box, found by run tag, else by id.
func (st *State) webhooksOf(ev sandbox.Event) []string {
	if r := st.FindRunTag(ev.RunTag); ev.RunTag != "" && r != nil {
		return r.Webhooks
	}
	if r := st.Find(ev.BoxID); ev.BoxID != "" && r != nil {
		return r.Webhooks
	}
	return nil
}
