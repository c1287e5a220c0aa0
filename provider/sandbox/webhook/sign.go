package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The headers of a delivery (Standard Webhooks).
const (
	// HeaderID is the event's id, the same on every attempt.
	HeaderID = standardwebhooks.HeaderWebhookID
	// HeaderTimestamp is when the attempt was signed, in unix seconds.
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	// HeaderSignature is "v1," and the base64 HMAC-SHA256 of
	// id.timestamp.body; a receiver accepts any one of its space-separated
	// signatures.
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, as the specification recommends.
const DefaultTolerance = 5 * time.Minute

// secretPrefix starts every secret.
const secretPrefix = "whsec_"

// Errors of Verify and of a bad secret.
var (
	// ErrSecret: the secret is not "whsec_" and base64.
	ErrSecret = errors.New("webhook secret: want whsec_ followed by base64")
	// ErrHeaders: a delivery header is missing or malformed.
	ErrHeaders = errors.New("webhook: missing or malformed signature headers")
	// ErrSignature: no signature matches the body.
	ErrSignature = errors.New("webhook: no matching signature")
	// ErrTimestamp: the timestamp is outside the tolerance (a replay, or a
	// clock far off).
	ErrTimestamp = errors.New("webhook: timestamp outside the tolerance")
)

// NewSecret returns a new random secret: "whsec_" and 32 random bytes in
// base64.
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return secretPrefix + base64.StdEncoding.EncodeToString(key)
}

// signer is the HMAC of one secret.
func signer(secret string) (*standardwebhooks.Webhook, error) {
	if !strings.HasPrefix(secret, secretPrefix) {
		return nil, ErrSecret
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, ErrSecret // its error may quote the secret
	}
	return wh, nil
}

// CheckSecret reports whether secret is one Sign and Verify take.
func CheckSecret(secret string) error {
	_, err := signer(secret)
	return err
}

// Sign sets the headers of a delivery of body as the event id, signed
// with secret at t.
func Sign(h http.Header, secret, id string, t time.Time, body []byte) error {
	wh, err := signer(secret)
	if err != nil {
		return err
	}
	sig, err := wh.Sign(id, t, body)
	if err != nil {
		return fmt.Errorf("webhook: sign: %w", err)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(t.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}

// Verify checks a delivery as a receiver gets it: its headers h, its raw
// body, and the endpoint's secret. The timestamp must be within tolerance
// of now (DefaultTolerance when zero), which bounds a replay. It returns
// nil, or an error that is ErrSecret, ErrHeaders, ErrTimestamp or
// ErrSignature. The id (h.Get(HeaderID)) is what receivers de-duplicate on.
func Verify(secret string, h http.Header, body []byte, tolerance time.Duration) error {
	wh, err := signer(secret)
	if err != nil {
		return err
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if h.Get(HeaderID) == "" || h.Get(HeaderSignature) == "" {
		return ErrHeaders
	}
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return ErrHeaders
	}
	if d := time.Since(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	if err := wh.VerifyIgnoringTimestamp(body, h); err != nil {
		if errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			return ErrSignature
		}
		return fmt.Errorf("%w: %w", ErrHeaders, err)
	}
	return nil
}
