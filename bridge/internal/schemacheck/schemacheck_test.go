package schemacheck

import (
	"strings"
	"testing"
)

const testSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$ref": "#/$defs/Doc",
  "$defs": {
    "Doc": {
      "type": "object",
      "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
        "flag": {"type": "boolean"},
        "count": {"type": "integer", "minimum": 0, "maximum": 3},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 1, "maxItems": 2, "uniqueItems": true},
        "inner": {"$ref": "#/$defs/Inner", "description": "annotated"},
        "kind": {"const": "x"}
      },
      "required": ["name", "flag"],
      "additionalProperties": false
    },
    "Inner": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}
  }
}`

func TestSchema_Validate(t *testing.T) {
	s, err := Parse([]byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		want      string // substring of the error; "" for valid
	}{
		{"minimal", `{"name":"ab","flag":true}`, ""},
		{"full", `{"name":"ab","flag":false,"count":3,"tags":["a","b"],"inner":{"ok":true},"kind":"x"}`, ""},
		{"missing required", `{"name":"ab"}`, `/: required property "flag" is missing`},
		{"unknown property", `{"name":"ab","flag":true,"x":1}`, `property "x" is not allowed`},
		{"wrong type", `{"name":"ab","flag":"true"}`, "/flag: string is not of type boolean"},
		{"not an object", `[1]`, "array is not of type object"},
		{"too short", `{"name":"","flag":true}`, "shorter"},
		{"too long", `{"name":"abcdef","flag":true}`, "longer"},
		{"pattern", `{"name":"AB","flag":true}`, "does not match"},
		{"not an integer", `{"name":"ab","flag":true,"count":1.5}`, "/count: number is not of type integer"},
		{"above maximum", `{"name":"ab","flag":true,"count":4}`, "more than"},
		{"below minimum", `{"name":"ab","flag":true,"count":-1}`, "less than"},
		{"empty array", `{"name":"ab","flag":true,"tags":[]}`, "fewer than"},
		{"long array", `{"name":"ab","flag":true,"tags":["a","b","a"]}`, "more than"},
		{"duplicate items", `{"name":"ab","flag":true,"tags":["a","a"]}`, "items 0 and 1 are equal"},
		{"item not in enum", `{"name":"ab","flag":true,"tags":["c"]}`, "/tags/0"},
		{"nested ref", `{"name":"ab","flag":true,"inner":{}}`, `/inner: required property "ok"`},
		{"const", `{"name":"ab","flag":true,"kind":"y"}`, "/kind"},
		{"trailing data", `{"name":"ab","flag":true} {}`, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate([]byte(tt.doc))
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate(%s) = %v, want nil", tt.doc, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate(%s) = %v, want an error containing %q", tt.doc, err, tt.want)
			}
		})
	}
}

func TestParse_Refuses(t *testing.T) {
	tests := []struct{ name, schema, want string }{
		{"unsupported keyword", `{"type":"object","oneOf":[]}`, `keyword "oneOf" is not supported`},
		{"nested unsupported keyword", `{"properties":{"a":{"format":"date"}}}`, `#/properties/a: keyword "format"`},
		{"dangling ref", `{"$ref":"#/$defs/Nope"}`, "does not resolve"},
		{"remote ref", `{"$ref":"https://example.com/s.json"}`, "not local"},
		{"bad pattern", `{"pattern":"("}`, "pattern"},
		{"not JSON", `{`, "parse schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.schema)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%s) = %v, want an error containing %q", tt.schema, err, tt.want)
			}
		})
	}
}
