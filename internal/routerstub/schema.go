package routerstub

import (
	"encoding/json"
	"strings"
)

// A structured-output request (Gemini's generationConfig with
// responseMimeType application/json and a schema) asks for an answer that
// parses as that schema: a harness retries any other answer with backoff
// (Gemini CLI's model router, a minute and a half of retries before it
// falls back). The stub answers such a request with an instance of the
// schema in place of its script's text.

// conforming returns reply with its text replaced by an instance of
// schema, kept as is when it is an error or a tool call.
func conforming(reply Reply, schema json.RawMessage) Reply {
	if reply.err != nil || len(schema) == 0 {
		return reply
	}
	for _, p := range reply.parts {
		if p.kind == partTool {
			return reply
		}
	}
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return reply
	}
	b, err := json.Marshal(instance(s, 0))
	if err != nil {
		return reply
	}
	out := Text(string(b))
	out.delay, out.gap = reply.delay, reply.gap
	return out
}

// instance is a small value schema s accepts: JSON Schema or the OpenAPI
// subset Gemini's responseSchema takes (upper-case type names). It takes
// a const or the first enum value, the first of anyOf and oneOf, every
// property of an object, the smallest allowed number (at least 1, as a
// score's range usually starts there), a non-empty string and arrays of
// their least length.
func instance(s map[string]any, depth int) any {
	if depth > 16 {
		return nil
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			if alt, ok := alts[0].(map[string]any); ok {
				return instance(alt, depth+1)
			}
		}
	}
	typ := ""
	switch t := s["type"].(type) {
	case string:
		typ = strings.ToLower(t)
	case []any:
		for _, v := range t {
			if name, ok := v.(string); ok && name != "null" {
				typ = strings.ToLower(name)
				break
			}
		}
	}
	if typ == "" && s["properties"] != nil {
		typ = "object"
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for name, ps := range props {
			if m, ok := ps.(map[string]any); ok {
				obj[name] = instance(m, depth+1)
			}
		}
		return obj
	case "array":
		n := 0
		if v, ok := s["minItems"].(float64); ok {
			n = int(v)
		}
		items, _ := s["items"].(map[string]any)
		arr := make([]any, 0, n)
		for range n {
			arr = append(arr, instance(items, depth+1))
		}
		return arr
	case "integer", "number":
		v := 1.0
		if m, ok := s["minimum"].(float64); ok {
			v = m
		}
		if m, ok := s["maximum"].(float64); ok && v > m {
			v = m
		}
		return v
	case "boolean":
		return false
	case "null":
		return nil
	}
	return "stub"
}
