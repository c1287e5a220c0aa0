package wire

import (
	"encoding/json"
	"errors"
)

// ValidKeyed checks the idempotency key and the request digest of a keyed
// request, and names the one that is malformed.
func ValidKeyed(key, digest string) error {
	if err := ValidIdentifier(key); err != nil {
		return errors.New("idempotencyKey " + err.Error())
	}
	if err := ValidDigest(digest); err != nil {
		return errors.New("requestDigest " + err.Error())
	}
	return nil
}

// CheckDigest checks that digest, the requestDigest of the request named
// what ("checkpoint"), is the Digest of material, what the digest covers.
func CheckDigest(digest string, material any, what string) error {
	want, err := Digest(material)
	if err == nil && want != digest {
		err = errors.New(what + " requestDigest does not match its content")
	}
	return err
}

// ValidObject reports whether an optional JSON field is absent or an
// object.
func ValidObject(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return true
	}
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m != nil
}
