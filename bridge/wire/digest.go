package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// RequestDigestSchema names the canonical form hashed by RequestDigest.
const RequestDigestSchema = "box-bridge.run-request.v1"

// Canonical renders a JSON value in canonical form: object keys sorted,
// no insignificant whitespace, numbers in their shortest float64 form, no
// HTML escaping. Two documents that differ only in key order, spacing or
// number spelling (1 and 1.0) have the same canonical form.
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(generic); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Digest returns "sha256:<hex>" of the canonical form of v.
func Digest(v any) (string, error) {
	c, err := Canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// RequestDigest is the digest a run id is bound to: the canonical form of
// {"schema", "harness", "request"} where request is the chat request body
// as a JSON object with the fields that do not change the job removed
// (`stream`; the representation of the answer is not part of the run).
// The session id from the X-Session-Id header must already be folded into
// the body's `session_id`.
func RequestDigest(harness string, body map[string]any) (string, error) {
	req := make(map[string]any, len(body))
	for k, v := range body {
		if k == "stream" || k == "stream_options" {
			continue
		}
		req[k] = v
	}
	return Digest(map[string]any{"schema": RequestDigestSchema, "harness": harness, "request": req})
}
