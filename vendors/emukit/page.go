package emukit

import (
	"encoding/base64"
	"net/url"
	"strconv"
)

// PageError is a list call's paging parameter that is out of range or
// unreadable; the emulator answers it in its vendor's words.
type PageError struct {
	// Param is the query parameter.
	Param string
	// Value is what it held.
	Value string
}

// Error names the parameter and its value.
func (e *PageError) Error() string { return "invalid " + e.Param + " " + strconv.Quote(e.Value) }

// ReadPage reads a list call's paging: the page size in limitParam (1 to
// max; default def) and the position in tokenParam (a token of
// PageToken; default 0).
func ReadPage(q url.Values, limitParam, tokenParam string, def, max int) (limit, pos int, err error) {
	limit = def
	if v := q.Get(limitParam); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return 0, 0, &PageError{Param: limitParam, Value: v}
		}
		limit = n
	}
	if v := q.Get(tokenParam); v != "" {
		raw, err := base64.RawURLEncoding.DecodeString(v)
		n, aerr := strconv.Atoi(string(raw))
		if err != nil || aerr != nil || n < 0 {
			return 0, 0, &PageError{Param: tokenParam, Value: v}
		}
		pos = n
	}
	return limit, pos, nil
}

// PageToken is the token of a list position, as ReadPage reads it.
func PageToken(pos int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(pos)))
}
