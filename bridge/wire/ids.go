package wire

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxRunIDLength is the longest run id the protocol accepts.
const MaxRunIDLength = 128

// ErrInvalidRunID is returned by ValidRunID for an id outside the grammar.
var ErrInvalidRunID = errors.New("run id must be 1-128 characters: a letter or digit, then letters, digits, '.', '_', ':' or '-'")

// ValidRunID checks the run id grammar: 1-128 characters, starting with
// an ASCII letter or digit, then [A-Za-z0-9._:-].
func ValidRunID(id string) error {
	if len(id) == 0 || len(id) > MaxRunIDLength {
		return ErrInvalidRunID
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return ErrInvalidRunID
		}
		if !alnum && c != '.' && c != '_' && c != ':' && c != '-' {
			return ErrInvalidRunID
		}
	}
	return nil
}

// ValidIdentifier checks an identity coordinate (provider, environment,
// session or execution id) that travels in a header: 1-512 bytes, no
// outer whitespace and no control characters.
func ValidIdentifier(v string) error {
	if len(v) == 0 || len(v) > 512 {
		return errors.New("must be 1-512 characters")
	}
	if TrimJS(v) != v {
		return errors.New("must not have outer whitespace")
	}
	for _, r := range v {
		if r < 0x20 || r >= 0x7f && r <= 0x9f {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

// ParseCursor resolves the replay cursor from the Last-Event-ID header and
// its X-Last-Event-Id alias (pass "" for an absent header). Absent means 0,
// from the start; N means strictly after event N. Both present must agree.
func ParseCursor(standard, alias string) (int64, error) {
	parse := func(name, v string) (int64, bool, error) {
		if v == "" {
			return 0, false, nil
		}
		if len(v) > 1 && v[0] == '0' {
			return 0, false, fmt.Errorf("%s must be a non-negative base-10 integer", name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || v[0] == '+' {
			return 0, false, fmt.Errorf("%s must be a non-negative base-10 integer", name)
		}
		return n, true, nil
	}
	a, aok, err := parse(HeaderLastEventID, standard)
	if err != nil {
		return 0, err
	}
	b, bok, err := parse(HeaderXLastEventID, alias)
	if err != nil {
		return 0, err
	}
	if aok && bok && a != b {
		return 0, fmt.Errorf("%s and %s must match when both are provided", HeaderLastEventID, HeaderXLastEventID)
	}
	if aok {
		return a, nil
	}
	return b, nil
}

// ValidDigest checks the form of a digest: "sha256:" and 64 lowercase hex
// digits.
func ValidDigest(d string) error {
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return errors.New("must be sha256: and 64 lowercase hex digits")
	}
	return nil
}

// ValidRunRef checks that every coordinate of an exact run reference is
// present and well formed, and names the first one that is not.
func ValidRunRef(r RunRef) error {
	for _, f := range []struct{ name, v string }{{"runId", r.RunID}, {"provider", r.Provider},
		{"environmentId", r.EnvironmentID}, {"sessionId", r.SessionID}, {"executionId", r.ExecutionID}} {
		if err := ValidIdentifier(f.v); err != nil {
			return fmt.Errorf("run.%s %w", f.name, err)
		}
	}
	if err := ValidDigest(r.RequestDigest); err != nil {
		return fmt.Errorf("run.requestDigest %w", err)
	}
	return nil
}

// NewID returns a fresh random id: prefix then 24 lowercase hex digits.
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
