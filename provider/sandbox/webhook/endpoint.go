package webhook

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

// Endpoint is where deliveries go.
type Endpoint struct {
	// URL receives the POSTs: an absolute http or https URL.
	URL string
	// Secret signs them: "whsec_" and base64 (NewSecret). It never leaves
	// the Sender's memory.
	Secret string
	// Types, when set, are the only event types sent here. Default: all.
	Types []sandbox.EventType
}

// wants reports whether e takes events of type t.
func (e Endpoint) wants(t sandbox.EventType) bool {
	return len(e.Types) == 0 || slices.Contains(e.Types, t)
}

// check validates e; its errors name the endpoint by Redact only.
func (e Endpoint) check() error {
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("endpoint %s: want an absolute http or https URL", Redact(e.URL))
	}
	if err := CheckSecret(e.Secret); err != nil {
		return fmt.Errorf("endpoint %s: %w", Redact(e.URL), err)
	}
	return nil
}

// String names the endpoint by Redact, never its secret.
func (e Endpoint) String() string { return "endpoint(" + Redact(e.URL) + ")" }

// LogValue names the endpoint by Redact, never its secret.
func (e Endpoint) LogValue() slog.Value { return slog.StringValue(e.String()) }

// Redact is how logs and errors name an endpoint URL: its scheme and host,
// since a hook's path or query may hold a token of its own.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host + "/..."
}

// Message is the JSON body of a delivery.
type Message struct {
	// ID is the event's id (also the webhook-id header): the same on
	// every delivery of the event, to every endpoint.
	ID string `json:"id"`
	// Type is the event's type (created, ready, turn.ended, destroyed...).
	Type sandbox.EventType `json:"type"`
	// Timestamp is when the event happened.
	Timestamp time.Time `json:"timestamp"`
	// Data is the event: box id, vendor, run tag, reason, and on a turn's
	// end its usage where the broker measured one.
	Data sandbox.Event `json:"data"`
}

// NewID returns a new event id: "evt_" and 32 hex digits.
func NewID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "evt_" + hex.EncodeToString(b)
}

// redactErr drops the URL that net/http puts in its errors.
func redactErr(err error) string {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Op + " " + Redact(ue.URL) + ": " + ue.Err.Error()
	}
	return err.Error()
}
