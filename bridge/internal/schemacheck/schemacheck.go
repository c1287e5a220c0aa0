package schemacheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Schema is a parsed schema document.
type Schema struct {
	root     map[string]any
	patterns map[string]*regexp.Regexp
}

// keywords are the keywords Validate applies; annotations are ignored.
var (
	keywords = []string{"$ref", "$defs", "type", "properties", "required", "additionalProperties", "items", "enum",
		"const", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "minimum", "maximum"}
	annotations = []string{"$schema", "$id", "title", "description", "$comment", "default", "examples"}
)

// Parse parses a schema document and checks that it uses only the
// supported keywords and that its references resolve.
func Parse(doc []byte) (*Schema, error) {
	var root map[string]any
	if err := decode(doc, &root); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	s := &Schema{root: root, patterns: map[string]*regexp.Regexp{}}
	if err := s.check(root, "#"); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	return s, nil
}

func decode(doc []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// check walks a subschema at path.
func (s *Schema) check(node map[string]any, path string) error {
	for k, v := range node {
		switch {
		case slices.Contains(annotations, k):
		case !slices.Contains(keywords, k):
			return fmt.Errorf("%s: keyword %q is not supported", path, k)
		case k == "$ref":
			ref, ok := v.(string)
			if !ok {
				return fmt.Errorf("%s/$ref: not a string", path)
			}
			if _, err := s.resolve(ref); err != nil {
				return fmt.Errorf("%s/$ref: %w", path, err)
			}
		case k == "$defs" || k == "properties":
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s/%s: not an object", path, k)
			}
			for name, sub := range m {
				sm, ok := sub.(map[string]any)
				if !ok {
					return fmt.Errorf("%s/%s/%s: not a schema object", path, k, name)
				}
				if err := s.check(sm, path+"/"+k+"/"+name); err != nil {
					return err
				}
			}
		case k == "items" || k == "additionalProperties":
			switch sub := v.(type) {
			case bool:
			case map[string]any:
				if err := s.check(sub, path+"/"+k); err != nil {
					return err
				}
			default:
				return fmt.Errorf("%s/%s: not a schema", path, k)
			}
		case k == "pattern":
			p, ok := v.(string)
			if !ok {
				return fmt.Errorf("%s/pattern: not a string", path)
			}
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("%s/pattern: %w", path, err)
			}
			s.patterns[p] = re
		}
	}
	return nil
}

func (s *Schema) resolve(ref string) (map[string]any, error) {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return nil, fmt.Errorf("reference %q is not local to $defs", ref)
	}
	defs, _ := s.root["$defs"].(map[string]any)
	def, ok := defs[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("reference %q does not resolve", ref)
	}
	return def, nil
}

// Validate checks a JSON document against the schema. The error lists
// every violation, each with the JSON pointer of the offending value.
func (s *Schema) Validate(doc []byte) error {
	var v any
	if err := decode(doc, &v); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	var errs []error
	s.validate(s.root, v, "", &errs)
	return errors.Join(errs...)
}

func (s *Schema) validate(node map[string]any, v any, ptr string, errs *[]error) {
	fail := func(format string, args ...any) {
		at := ptr
		if at == "" {
			at = "/"
		}
		*errs = append(*errs, fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...)))
	}
	if ref, ok := node["$ref"].(string); ok {
		def, err := s.resolve(ref)
		if err != nil {
			fail("%v", err)
			return
		}
		s.validate(def, v, ptr, errs)
	}
	if t, ok := node["type"]; ok && !typeMatches(t, v) {
		fail("%s is not of type %v", kind(v), t)
		return
	}
	if enum, ok := node["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return equal(e, v) }) {
		fail("%s is not one of %v", compact(v), enum)
	}
	if c, ok := node["const"]; ok && !equal(c, v) {
		fail("%s is not %v", compact(v), c)
	}
	switch v := v.(type) {
	case map[string]any:
		s.validateObject(node, v, ptr, errs, fail)
	case []any:
		if n, ok := number(node["minItems"]); ok && float64(len(v)) < n {
			fail("has %d items, fewer than %v", len(v), n)
		}
		if n, ok := number(node["maxItems"]); ok && float64(len(v)) > n {
			fail("has %d items, more than %v", len(v), n)
		}
		if node["uniqueItems"] == true {
			for i := range v {
				for j := range i {
					if equal(v[i], v[j]) {
						fail("items %d and %d are equal", j, i)
					}
				}
			}
		}
		if items, ok := node["items"].(map[string]any); ok {
			for i, it := range v {
				s.validate(items, it, ptr+"/"+strconv.Itoa(i), errs)
			}
		} else if node["items"] == false && len(v) > 0 {
			fail("no items are allowed")
		}
	case string:
		n := float64(utf8.RuneCountInString(v))
		if m, ok := number(node["minLength"]); ok && n < m {
			fail("%q is shorter than %v", v, m)
		}
		if m, ok := number(node["maxLength"]); ok && n > m {
			fail("%q is longer than %v", v, m)
		}
		if p, ok := node["pattern"].(string); ok && !s.patterns[p].MatchString(v) {
			fail("%q does not match %q", v, p)
		}
	case json.Number:
		f, _ := v.Float64()
		if m, ok := number(node["minimum"]); ok && f < m {
			fail("%v is less than %v", v, m)
		}
		if m, ok := number(node["maximum"]); ok && f > m {
			fail("%v is more than %v", v, m)
		}
	}
}

func (s *Schema) validateObject(node map[string]any, v map[string]any, ptr string, errs *[]error, fail func(string, ...any)) {
	if req, ok := node["required"].([]any); ok {
		for _, r := range req {
			if name, _ := r.(string); name != "" {
				if _, ok := v[name]; !ok {
					fail("required property %q is missing", name)
				}
			}
		}
	}
	props, _ := node["properties"].(map[string]any)
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		child := ptr + "/" + escape(name)
		if sub, ok := props[name].(map[string]any); ok {
			s.validate(sub, v[name], child, errs)
			continue
		}
		switch ap := node["additionalProperties"].(type) {
		case bool:
			if !ap {
				fail("property %q is not allowed", name)
			}
		case map[string]any:
			s.validate(ap, v[name], child, errs)
		}
	}
}

func escape(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

func typeMatches(t any, v any) bool {
	switch t := t.(type) {
	case string:
		return isType(t, v)
	case []any:
		return slices.ContainsFunc(t, func(e any) bool { s, _ := e.(string); return isType(s, v) })
	}
	return false
}

func isType(t string, v any) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == math.Trunc(f)
	}
	return false
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// equal compares JSON values; numbers compare by value.
func equal(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, err1 := x.Float64()
		fy, err2 := y.Float64()
		return err1 == nil && err2 == nil && fx == fy
	}
	return reflect.DeepEqual(a, b)
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
