package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// RequestDigestSchema names the canonical form hashed by RequestDigest.
const RequestDigestSchema = "box-bridge.run-request.v1"

// Canonical renders a value that encoding/json can marshal in the JSON
// Canonicalization Scheme (RFC 8785): object keys sorted by their UTF-16
// code units, no insignificant whitespace, numbers as ECMAScript prints
// them, strings escaped as JSON.stringify escapes them. It is the one
// canonical form of this module, and the one the TypeScript agent
// interface hashes (canonicalCandidateJson), so a digest computed here
// equals the digest the TypeScript side computes for the same document.
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return c, nil
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
// as a JSON object with the fields that do not change the job removed:
// `stream` and `stream_options` (the representation of the answer is not
// part of the run) and `run_id` (the name the run is bound under, not
// what it does; the TypeScript bridge leaves it out too, so the same job
// under two run ids has one digest). The session id from the X-Session-Id
// header must already be folded into the body's `session_id`.
func RequestDigest(harness string, body map[string]any) (string, error) {
	req := make(map[string]any, len(body))
	for k, v := range body {
		if k == "stream" || k == "stream_options" || k == "run_id" {
			continue
		}
		req[k] = v
	}
	return Digest(map[string]any{"schema": RequestDigestSchema, "harness": harness, "request": req})
}

// material is v as a JSON object without the named keys: what the digest
// of a request or record covers when it covers all of it but its keys and
// its digest. An error to encode v comes back from Digest of the result.
func material(v any, keys ...string) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return badMaterial{err}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return badMaterial{err}
	}
	for _, k := range keys {
		delete(m, k)
	}
	return m
}

// badMaterial is material that could not be built; encoding it fails.
type badMaterial struct{ err error }

func (b badMaterial) MarshalJSON() ([]byte, error) { return nil, b.err }

// MustJSON encodes v, a value of this package's types, which always
// encode.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("wire: encode: " + err.Error())
	}
	return b
}
