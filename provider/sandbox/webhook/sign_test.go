package webhook

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func TestVerify(t *testing.T) {
	secret, other := NewSecret(), NewSecret()
	body := []byte(`{"id":"evt_1","type":"ready"}`)
	signed := func(at time.Time) http.Header {
		h := http.Header{}
		if err := Sign(h, secret, "evt_1", at, body); err != nil {
			t.Fatal(err)
		}
		return h
	}
	now := time.Now()
	tests := []struct {
		name   string
		secret string
		header func() http.Header
		body   []byte
		want   error
	}{
		{"valid", secret, func() http.Header { return signed(now) }, body, nil},
		{"within tolerance", secret, func() http.Header { return signed(now.Add(-4 * time.Minute)) }, body, nil},
		{"one of several signatures", secret, func() http.Header {
			h := signed(now)
			h.Set(HeaderSignature, "v1,AAAA "+h.Get(HeaderSignature))
			return h
		}, body, nil},
		{"tampered body", secret, func() http.Header { return signed(now) }, []byte(`{"id":"evt_1","type":"destroyed"}`), ErrSignature},
		{"other id", secret, func() http.Header {
			h := signed(now)
			h.Set(HeaderID, "evt_2")
			return h
		}, body, ErrSignature},
		{"wrong secret", other, func() http.Header { return signed(now) }, body, ErrSignature},
		{"replayed", secret, func() http.Header { return signed(now.Add(-6 * time.Minute)) }, body, ErrTimestamp},
		{"from the future", secret, func() http.Header { return signed(now.Add(6 * time.Minute)) }, body, ErrTimestamp},
		{"no id", secret, func() http.Header {
			h := signed(now)
			h.Del(HeaderID)
			return h
		}, body, ErrHeaders},
		{"bad timestamp", secret, func() http.Header {
			h := signed(now)
			h.Set(HeaderTimestamp, "soon")
			return h
		}, body, ErrHeaders},
		{"no signature", secret, func() http.Header {
			h := signed(now)
			h.Del(HeaderSignature)
			return h
		}, body, ErrHeaders},
		{"bad secret", "s3cret-not-whsec", func() http.Header { return signed(now) }, body, ErrSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.header(), tt.body, 0)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Verify() = %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), strings.TrimPrefix(tt.secret, "whsec_")) {
				t.Errorf("Verify() = %v: quotes the secret", err)
			}
		})
	}
}

func TestVerify_Tolerance(t *testing.T) {
	secret := NewSecret()
	h := http.Header{}
	if err := Sign(h, secret, "evt_1", time.Now().Add(-time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if err := Verify(secret, h, nil, 30*time.Second); !errors.Is(err, ErrTimestamp) {
		t.Errorf("Verify(tolerance 30s, signed 1m ago) = %v, want %v", err, ErrTimestamp)
	}
	if err := Verify(secret, h, nil, 2*time.Minute); err != nil {
		t.Errorf("Verify(tolerance 2m, signed 1m ago) = %v, want nil", err)
	}
}

// TestSign_StandardWebhooks checks that a receiver's Standard Webhooks
// library accepts what Sign makes, and that the header values are the
// specification's: unix seconds and "v1,".
func TestSign_StandardWebhooks(t *testing.T) {
	secret := NewSecret()
	body := []byte(`{"type":"destroyed"}`)
	now := time.Now()
	h := http.Header{}
	if err := Sign(h, secret, "evt_abc", now, body); err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Errorf("standardwebhooks Verify(Sign()) = %v, want nil", err)
	}
	if got, want := h.Get(HeaderTimestamp), strconv.FormatInt(now.Unix(), 10); got != want {
		t.Errorf("%s = %q, want %q", HeaderTimestamp, got, want)
	}
	if got := h.Get(HeaderSignature); !strings.HasPrefix(got, "v1,") {
		t.Errorf("%s = %q, want v1,<base64>", HeaderSignature, got)
	}
	if err := CheckSecret(NewSecret()); err != nil {
		t.Errorf("CheckSecret(NewSecret()) = %v", err)
	}
}
