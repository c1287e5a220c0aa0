package webhook

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"
)

// Endpoint is where deliveries go.
type Endpoint struct {
	// URL receives the POSTs: an absolute http or https URL.
	URL string
	// Secret signs them: "whsec_" and base64 (NewSecret). It never leaves
	// the Sender's memory.
	Secret string
	// Types, when set, are the only event types sent here. Default: all.
	Types []string
}

// wants reports whether e takes events of type t.
func (e Endpoint) wants(t string) bool {
	return len(e.Types) == 0 || slices.Contains(e.Types, t)
}

// CheckURL checks an endpoint URL: absolute, http or https, with a host
// and no user information. Its error never quotes the URL.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return errors.New("want an absolute http or https URL without credentials")
	}
	return nil
}

// check validates e; its errors name the endpoint by Redact only.
func (e Endpoint) check() error {
	if err := CheckURL(e.URL); err != nil {
		return fmt.Errorf("endpoint %s: %w", Redact(e.URL), err)
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

// Event is what a Sender delivers. For a box's lifecycle events it is
// sandbox.WebhookEvent's.
type Event struct {
	// Type is the event's type (created, ready, turn.ended, destroyed...).
	Type string
	// Time is when it happened. Default: when it is recorded.
	Time time.Time
	// Data is the event itself, any value encoding/json takes: for a
	// lifecycle event the sandbox.Event (box id, vendor, run tag, reason,
	// and on a turn's end its usage where the broker measured one).
	Data any
}

// Message is the JSON body of a delivery.
type Message struct {
	// ID is the event's id (also the webhook-id header): the same on
	// every delivery of the event, to every endpoint.
	ID string `json:"id"`
	// Type is the event's type.
	Type string `json:"type"`
	// Timestamp is when the event happened.
	Timestamp time.Time `json:"timestamp"`
	// Data is the event itself (Event.Data).
	Data json.RawMessage `json:"data"`
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
