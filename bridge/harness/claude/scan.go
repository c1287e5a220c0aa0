package claude

import "unicode/utf8"

// deltaScan is one pass over a line that validates it as JSON (as
// json.Valid does) and finds the fields a delta line is told by: the
// top-level type, the event's type, the event's delta's type, text and
// thinking. It is the common case of fastDelta: a line it cannot read
// plainly (a relevant field given twice, spelled otherwise, escaped, or
// of another JSON type) it declines, and fastDelta's general checks
// decide.
type deltaScan struct {
	raw []byte
	i   int
	// The fields found, as spans of raw holding string contents without
	// escapes, and whether each was seen.
	typ, eventType, deltaType, text, thinking                span
	seenType, seenEvent, seenEventType, seenDelta, seenDType bool
	seenText, seenThinking                                   bool
	declined                                                 bool
}

// span is raw[from:to].
type span struct{ from, to int }

func (s *deltaScan) is(sp span, want string) bool { return string(s.raw[sp.from:sp.to]) == want }

// maxScanDepth is encoding/json's nesting limit: deeper lines are left
// to the general checks.
const maxScanDepth = 10000

// scanDelta reads a text or thinking delta line in one pass: ok false
// means fastDelta's general checks decide.
func scanDelta(raw []byte) (kind string, text string, ok bool) {
	s := deltaScan{raw: raw}
	s.ws()
	if !s.value(0, 0) {
		return "", "", false
	}
	s.ws()
	if s.i != len(raw) || s.declined || !s.is(s.typ, "stream_event") || !s.is(s.eventType, "content_block_delta") {
		return "", "", false
	}
	var t span
	switch {
	case s.is(s.deltaType, "text_delta") && s.seenText:
		kind, t = "text_delta", s.text
	case s.is(s.deltaType, "thinking_delta") && s.seenThinking:
		kind, t = "thinking_delta", s.thinking
	default:
		return "", "", false
	}
	if !utf8.Valid(raw[t.from:t.to]) {
		return "", "", false
	}
	return kind, string(raw[t.from:t.to]), true
}

func (s *deltaScan) ws() {
	for s.i < len(s.raw) {
		switch s.raw[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// The objects whose fields scanDelta looks at.
const (
	levelOther = iota
	levelTop
	levelEvent
	levelDelta
)

// value scans one value. level is the object level the value is the
// object of (levelOther: none that matters) and depth its nesting.
func (s *deltaScan) value(level, depth int) bool {
	if depth > maxScanDepth || s.i >= len(s.raw) {
		return false
	}
	if depth == 0 {
		level = levelTop
	}
	switch c := s.raw[s.i]; {
	case c == '{':
		return s.object(level, depth)
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.raw) && s.raw[s.i] == ']' {
			s.i++
			return true
		}
		for {
			s.ws()
			if !s.value(levelOther, depth+1) {
				return false
			}
			s.ws()
			if s.i >= len(s.raw) {
				return false
			}
			switch s.raw[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return false
	}
}

func (s *deltaScan) literal(lit string) bool {
	if len(s.raw)-s.i < len(lit) || string(s.raw[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// object scans an object at level.
func (s *deltaScan) object(level, depth int) bool {
	s.i++ // {
	s.ws()
	if s.i < len(s.raw) && s.raw[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.raw) || s.raw[s.i] != '"' {
			return false
		}
		key, plain, ok := s.str()
		if !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.raw) || s.raw[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		if s.i >= len(s.raw) || !s.field(level, key, plain, depth) {
			return false
		}
		s.ws()
		if s.i >= len(s.raw) {
			return false
		}
		switch s.raw[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// field scans the value of key in an object at level and records it when
// it is one scanDelta looks at.
func (s *deltaScan) field(level int, key span, plain bool, depth int) bool {
	var names []string
	switch level {
	case levelTop:
		names = []string{"type", "event"}
	case levelEvent:
		names = []string{"type", "delta"}
	case levelDelta:
		names = []string{"type", "text", "thinking"}
	}
	name := ""
	if names != nil {
		k := s.raw[key.from:key.to]
		if !plain {
			s.declined = true // an escaped key may spell a relevant one
		}
		for _, n := range names {
			switch {
			case string(k) == n:
				name = n
			case foldsTo(k, n):
				// encoding/json matches keys without regard to case.
				s.declined = true
			}
		}
	}
	// seen records that a field was found, declining a second one.
	seen := func(b *bool) {
		if *b {
			s.declined = true
		}
		*b = true
	}
	// plainString scans a string value into dst; another JSON type, or a
	// string with escapes, is declined.
	plainString := func(dst *span) bool {
		if s.raw[s.i] != '"' {
			s.declined = true
			return s.value(levelOther, depth+1)
		}
		v, plain, ok := s.str()
		if !plain {
			s.declined = true
		}
		*dst = v
		return ok
	}
	switch {
	case level == levelTop && name == "type":
		seen(&s.seenType)
		return plainString(&s.typ)
	case level == levelTop && name == "event":
		seen(&s.seenEvent)
		return s.nested(levelEvent, depth+1)
	case level == levelEvent && name == "type":
		seen(&s.seenEventType)
		return plainString(&s.eventType)
	case level == levelEvent && name == "delta":
		seen(&s.seenDelta)
		return s.nested(levelDelta, depth+1)
	case level == levelDelta && name == "type":
		seen(&s.seenDType)
		return plainString(&s.deltaType)
	case level == levelDelta && name == "text":
		seen(&s.seenText)
		return plainString(&s.text)
	case level == levelDelta && name == "thinking":
		seen(&s.seenThinking)
		return plainString(&s.thinking)
	}
	return s.value(levelOther, depth+1)
}

// str scans a string: the span of its contents as they stand (escapes
// not undone), whether it holds no escape, and whether it is a valid JSON
// string.
func (s *deltaScan) str() (v span, plain, ok bool) {
	s.i++ // "
	start := s.i
	plain = true
	for s.i < len(s.raw) {
		c := s.raw[s.i]
		switch {
		case c == '"':
			v = span{start, s.i}
			s.i++
			return v, plain, true
		case c < 0x20:
			return span{}, false, false
		case c == '\\':
			plain = false
			s.i++
			if s.i >= len(s.raw) {
				return span{}, false, false
			}
			switch s.raw[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+4 >= len(s.raw) {
					return span{}, false, false
				}
				for _, h := range s.raw[s.i+1 : s.i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return span{}, false, false
					}
				}
				s.i += 5
			default:
				return span{}, false, false
			}
		default:
			s.i++
		}
	}
	return span{}, false, false
}

// foldsTo reports whether k could be taken by encoding/json for the ASCII
// key n: equal to it regardless of ASCII case, or holding a byte that is
// not ASCII (which may fold to one of n's letters, as the Kelvin sign
// folds to k) where its length allows.
func foldsTo(k []byte, n string) bool {
	if len(k) < len(n) {
		return false
	}
	if len(k) == len(n) {
		eq := true
		for i := range k {
			if k[i]|0x20 != n[i]|0x20 {
				eq = false
			}
		}
		if eq {
			return true
		}
	}
	for _, c := range k {
		if c >= utf8.RuneSelf {
			return len(k) <= 3*len(n)
		}
	}
	return false
}

// number scans a JSON number.
func (s *deltaScan) number() bool {
	digits := func() int {
		n := 0
		for s.i < len(s.raw) && s.raw[s.i] >= '0' && s.raw[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.raw[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.raw) {
		return false
	}
	if s.raw[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return false
	}
	if s.i < len(s.raw) && s.raw[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return false
		}
	}
	if s.i < len(s.raw) && (s.raw[s.i] == 'e' || s.raw[s.i] == 'E') {
		s.i++
		if s.i < len(s.raw) && (s.raw[s.i] == '+' || s.raw[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// nested reads the object value of a field at level; any other value
// declines the line (the checked path reads it) and is skipped.
func (s *deltaScan) nested(level, depth int) bool {
	if s.raw[s.i] != '{' {
		s.declined = true
		return s.value(levelOther, depth)
	}
	return s.object(level, depth)
}
