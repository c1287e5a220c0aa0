package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Version is the version of the document's API.
const Version = "1"

// Document returns the OpenAPI 3.1 document of the bridge, indented, with
// a final newline.
func Document() ([]byte, error) {
	g := &generator{schemas: map[string]any{}, seen: map[reflect.Type]bool{}}
	paths := map[string]any{}
	for _, rt := range routes() {
		op, err := g.operation(rt)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s %s: %w", rt.method, rt.path, err)
		}
		item, _ := paths[rt.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.path] = item
		}
		item[strings.ToLower(rt.method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "box-bridge", "version": Version,
			"description": "The bridge protocol: durable runs of coding-agent CLIs, compatible with the TypeScript cli-bridge."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return buf.Bytes(), nil
}

type generator struct {
	schemas map[string]any
	seen    map[reflect.Type]bool
}

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

func (g *generator) operation(rt route) (map[string]any, error) {
	op := map[string]any{"summary": rt.summary, "operationId": operationID(rt)}
	var params []any
	for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range rt.query {
		params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
	}
	for _, h := range []string{wire.HeaderLastEventID, wire.HeaderXLastEventID} {
		if strings.HasSuffix(rt.path, "/events") || rt.path == "/v1/chat/completions" {
			params = append(params, map[string]any{"name": h, "in": "header", "schema": map[string]any{"type": "string"}})
		}
	}
	if params != nil {
		op["parameters"] = params
	}
	if rt.body != nil {
		s, err := g.schema(rt.body)
		if err != nil {
			return nil, err
		}
		op["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": s}}}
	}
	if rt.path == "/health" {
		op["security"] = []any{}
	}
	answers := map[int][]any{}
	for s, bodies := range rt.answers {
		answers[s] = slices.Clone(bodies)
	}
	for _, s := range []int{401, 500, 503} {
		if s != 500 && rt.path == "/health" || slices.Contains(answers[s], any(errBody)) {
			continue
		}
		answers[s] = append(answers[s], errBody)
	}
	responses := map[string]any{}
	for status, bodies := range answers {
		resp, err := g.response(status, bodies, rt.headers)
		if err != nil {
			return nil, err
		}
		responses[strconv.Itoa(status)] = resp
	}
	op["responses"] = responses
	return op, nil
}

func operationID(rt route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(rt.method))
	for _, part := range strings.Split(rt.path, "/") {
		part = strings.Trim(part, "{}")
		if part == "" || part == "v1" {
			continue
		}
		for _, w := range strings.FieldsFunc(part, func(r rune) bool { return r == '.' || r == '_' || r == '-' }) {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	if rt.path == "/" {
		b.WriteString("Root")
	}
	return b.String()
}

func (g *generator) response(status int, bodies []any, headers []string) (map[string]any, error) {
	resp := map[string]any{"description": statusText(status)}
	content := map[string]any{}
	var jsonSchemas []any
	seen := map[string]bool{}
	for _, b := range bodies {
		switch b.(type) {
		case sse:
			content["text/event-stream"] = map[string]any{"schema": map[string]any{"type": "string"}}
		case text:
			content["text/plain"] = map[string]any{"schema": map[string]any{"type": "string"}}
		default:
			s, err := g.schema(b)
			if err != nil {
				return nil, err
			}
			if key := fmt.Sprint(s); !seen[key] {
				seen[key] = true
				jsonSchemas = append(jsonSchemas, s)
			}
		}
	}
	switch len(jsonSchemas) {
	case 0:
	case 1:
		content["application/json"] = map[string]any{"schema": jsonSchemas[0]}
	default:
		content["application/json"] = map[string]any{"schema": map[string]any{"anyOf": jsonSchemas}}
	}
	if len(content) > 0 {
		resp["content"] = content
	}
	hs := map[string]any{}
	if status >= 200 && status < 300 {
		for _, h := range headers {
			hs[h] = map[string]any{"schema": map[string]any{"type": "string"}}
		}
	}
	if status == 429 || status == 202 && slices.Contains(headers, wire.HeaderRunStatus) {
		hs[wire.HeaderRetryAfter] = map[string]any{"schema": map[string]any{"type": "string"}}
	}
	if len(hs) > 0 {
		resp["headers"] = hs
	}
	return resp, nil
}

// schema returns a reference to the component schema of v's type,
// reflecting it (and what it refers to) the first time.
func (g *generator) schema(v any) (map[string]any, error) {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Map {
		return map[string]any{"type": "object"}, nil
	}
	if !g.seen[t] {
		r := &jsonschema.Reflector{Anonymous: true, DoNotReference: false}
		s := r.ReflectFromType(t)
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(bytes.ReplaceAll(raw, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`)), &m); err != nil {
			return nil, err
		}
		defs, _ := m["$defs"].(map[string]any)
		for name, d := range defs {
			g.schemas[name] = d
		}
		if err := nullable(t, g.schemas, map[reflect.Type]bool{}); err != nil {
			return nil, err
		}
		g.seen[t] = true
	}
	return map[string]any{"$ref": "#/components/schemas/" + t.Name()}, nil
}

// nullable lets the fields of struct t (and of the structs it holds) that
// encoding/json writes as null be null: pointers, slices and maps without
// omitempty. The reflected schemas do not say so themselves.
func nullable(t reflect.Type, schemas map[string]any, done map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || done[t] || t.PkgPath() == "time" {
		return nil
	}
	done[t] = true
	def, _ := schemas[t.Name()].(map[string]any)
	props, _ := def["properties"].(map[string]any)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			if err := nullable(f.Type, schemas, done); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if err := nullable(f.Type, schemas, done); err != nil {
			return err
		}
		k := f.Type.Kind()
		if strings.Contains(opts, "omitempty") || k != reflect.Pointer && k != reflect.Slice && k != reflect.Map {
			continue
		}
		if f.Type == reflect.TypeOf(json.RawMessage{}) {
			continue // any JSON value, null included
		}
		if p, ok := props[name]; ok {
			props[name] = map[string]any{"anyOf": []any{p, map[string]any{"type": "null"}}}
		} else if def != nil {
			return fmt.Errorf("schema %s has no property %s", t.Name(), name)
		}
	}
	return nil
}
