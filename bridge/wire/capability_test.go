package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"

	"github.com/tangle-network/boxctl/bridge/internal/schemacheck"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

// schemaFile is the published JSON Schema of Capabilities.
const schemaFile = "capabilities.schema.json"

// capabilitySchema generates the JSON Schema of Capabilities, with the Go
// doc comments as descriptions.
func capabilitySchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{}
	if err := r.AddGoComments("github.com/tangle-network/boxctl/bridge/wire", "."); err != nil {
		t.Fatalf("read doc comments: %v", err)
	}
	s := r.Reflect(&Capabilities{})
	s.ID = "https://github.com/tangle-network/boxctl/bridge/wire/" + schemaFile
	s.Title = "bridge capability document (GET /v1/capabilities?model=)"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestCapabilitySchema_Current(t *testing.T) {
	goldentest.Check(t, schemaFile, capabilitySchema(t))
}

func loadSchema(t *testing.T) *schemacheck.Schema {
	t.Helper()
	b, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schemacheck.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// edit returns the JSON document doc with the top-level or nested key
// (dot-separated path) set to value, or removed for a nil value.
func edit(t *testing.T, doc []byte, path string, value any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	keys := strings.Split(path, ".")
	cur := m
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	if value == nil {
		delete(cur, keys[len(keys)-1])
	} else {
		cur[keys[len(keys)-1]] = value
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCapabilitySchema_Documents checks the schema against the documents
// the TypeScript cli-bridge serves (its generic durable document and its
// native Pi document) and against broken variants of them.
func TestCapabilitySchema_Documents(t *testing.T) {
	schema := loadSchema(t)
	generic := readFile(t, "testdata/capabilities-ts-generic.json")
	pi := readFile(t, "testdata/capabilities-ts-pi-native.json")
	interactions := map[string]any{"kinds": []string{"permission"}, "answerFieldTypes": []string{"select"},
		"responseScopes": []string{"interaction"}, "secretAnswers": false, "concurrentRequests": false, "replay": true,
		"responseIdempotency": true}
	tests := []struct {
		name  string
		doc   []byte
		valid bool
	}{
		{"ts generic", generic, true},
		{"ts pi native", pi, true},
		{"ours for claude-code", edit(t, generic, "interactions", interactions), true},
		{"placement as a string", edit(t, generic, "placement", "box"), false},
		{"usage as an object", edit(t, generic, "usage", map[string]any{"measured": true}), false},
		{"unknown top-level key", edit(t, generic, "scheme", "x"), false},
		{"unknown nested key", edit(t, generic, "streaming.resume", true), false},
		{"profile of the old shape", edit(t, generic, "profile", map[string]any{"harness": "claude-code", "model": "opus"}), false},
		{"systemPrompt as a boolean", edit(t, generic, "profile.systemPrompt", true), false},
		{"no confidential", edit(t, generic, "confidential", nil), false},
		{"no streaming", edit(t, generic, "streaming", nil), false},
		{"retainedControl incomplete object", edit(t, generic, "retainedControl.eventIdentity", nil), false},
		{"empty interaction kinds", edit(t, edit(t, generic, "interactions", interactions), "interactions.kinds", []string{}), false},
		{"unknown answer field type", edit(t, edit(t, generic, "interactions", interactions), "interactions.answerFieldTypes", []string{"file"}), false},
		{"duplicate response scope", edit(t, edit(t, generic, "interactions", interactions), "interactions.responseScopes", []string{"interaction", "interaction"}), false},
		{"string flag", edit(t, generic, "workspace.read", "false"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := schema.Validate(tt.doc)
			if (err == nil) != tt.valid {
				t.Errorf("Validate(%s) = %v, want valid %v", tt.doc, err, tt.valid)
			}
			if !tt.valid {
				return
			}
			// A valid document decodes strictly into Capabilities and
			// passes the rules the schema cannot express.
			var c Capabilities
			dec := json.NewDecoder(bytes.NewReader(tt.doc))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&c); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Capabilities.Validate() = %v, want nil", err)
			}
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(out); err != nil {
				t.Errorf("the re-encoded document is invalid: %v", err)
			}
		})
	}
}

func TestCapabilities_Validate(t *testing.T) {
	full := func() Capabilities {
		return Capabilities{
			Streaming:       StreamingCaps{Live: true, Replay: true, Detach: true, TurnIdempotency: true},
			Sessions:        SessionCaps{Continue: true},
			RetainedControl: &RetainedControlCaps{ExactRunIdentity: true, ResultIdentity: true, EventIdentity: true, CancellationIdempotency: true},
			Interactions: &InteractionCaps{Kinds: []string{"permission"}, AnswerFieldTypes: []string{FieldSelect},
				ResponseScopes: []string{ScopeInteraction}, Replay: true, ResponseIdempotency: true},
		}
	}
	tests := []struct {
		name   string
		change func(*Capabilities)
		want   string // substring of the error; "" for valid
	}{
		{"complete", func(*Capabilities) {}, ""},
		{"retained control without continue", func(c *Capabilities) { c.Sessions.Continue = false }, "retainedControl"},
		{"retained control without replay", func(c *Capabilities) { c.Streaming.Replay = false }, "retainedControl"},
		{"retained control with a false flag", func(c *Capabilities) { c.RetainedControl.EventIdentity = false }, "retainedControl"},
		{"half native continuation", func(c *Capabilities) { c.NativeContinuation = &NativeContinuationCaps{AtomicBoundary: true} }, "nativeContinuation"},
		{"secret type without secretAnswers", func(c *Capabilities) { c.Interactions.AnswerFieldTypes = []string{FieldSecret} }, "secretAnswers"},
		{"secretAnswers without the type", func(c *Capabilities) { c.Interactions.SecretAnswers = true }, "secretAnswers"},
		{"duplicate kinds", func(c *Capabilities) { c.Interactions.Kinds = []string{"permission", "permission"} }, "kinds must be unique"},
		{"no scopes", func(c *Capabilities) { c.Interactions.ResponseScopes = nil }, "responseScopes must not be empty"},
		{"retry-safe branching alone", func(c *Capabilities) { c.Branching.RetrySafe = true }, "branching"},
		{"terminal input without attach", func(c *Capabilities) { c.InteractiveTerminal = &InteractiveTerminalCaps{Input: true} }, "attach"},
		{"duplicate extensions", func(c *Capabilities) { c.Profile.Extensions = []string{"pi", "pi"} }, "extensions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := full()
			tt.change(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error about %q", err, tt.want)
			}
		})
	}
}
