// Package schemacheck validates JSON documents against the subset of JSON
// Schema (draft 2020-12) that github.com/invopop/jsonschema emits for Go
// types: local $ref into $defs, type, properties, required,
// additionalProperties, items, enum, const, minItems, maxItems,
// uniqueItems, minLength, maxLength, pattern, minimum and maximum.
//
// A schema that uses any other keyword is refused when parsed, so that a
// constraint is never ignored silently. Annotations ($schema, $id, title,
// description, $comment, default, examples) are accepted and ignored.
//
// A Schema is immutable once parsed and safe for concurrent use.
package schemacheck
