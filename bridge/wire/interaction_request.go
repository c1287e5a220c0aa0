package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
)

// InteractionKindPermission is the kind of an interaction that asks to run
// a tool.
const InteractionKindPermission = "permission"

// Permission answer fields and grants. An accepted permission response
// carries data {"grant": ["allow_once"|"deny"], "feedback"?: "..."}.
const (
	PermissionGrantField    = "grant"
	PermissionFeedbackField = "feedback"
	GrantAllowOnce          = "allow_once"
	GrantDeny               = "deny"
)

// Subject types of an interaction request.
const (
	SubjectTool     = "tool"
	SubjectCommand  = "command"
	SubjectFile     = "file"
	SubjectResource = "resource"
)

// InteractionRequest is the `request` of an `interaction` event: what the
// harness asks, the shape of a valid answer (AnswerSpec), and the exact run
// it binds to. RequestDigest is InteractionRequestDigest of the other
// fields; a response command carries it in its binding.
type InteractionRequest struct {
	ID              string                    `json:"id"`
	Kind            string                    `json:"kind"`
	Title           string                    `json:"title"`
	Body            string                    `json:"body,omitempty"`
	Subject         *InteractionSubject       `json:"subject,omitempty"`
	AnswerSpec      AnswerSpec                `json:"answerSpec"`
	ResponseScopes  []string                  `json:"responseScopes,omitempty"`
	AllowedOutcomes []string                  `json:"allowedOutcomes,omitempty"`
	Binding         InteractionRequestBinding `json:"binding"`
	RequestDigest   string                    `json:"requestDigest"`
}

// InteractionSubject says what an interaction is about. Type selects the
// fields: tool (ToolName, Input), command (Command), file (Path,
// Preview), resource (URI).
type InteractionSubject struct {
	Type     string          `json:"type"`
	ToolName string          `json:"toolName,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	Command  string          `json:"command,omitempty"`
	Path     string          `json:"path,omitempty"`
	Preview  string          `json:"preview,omitempty"`
	URI      string          `json:"uri,omitempty"`
}

// AnswerSpec describes a valid answer: its fields, by name.
type AnswerSpec struct {
	Fields []InteractionField `json:"fields"`
}

// InteractionField is one answer field. Type is one of the Field...
// constants; Options are the choices of a select field.
type InteractionField struct {
	Name      string        `json:"name"`
	Label     string        `json:"label"`
	Type      string        `json:"type"`
	Required  bool          `json:"required,omitempty"`
	Multiline bool          `json:"multiline,omitempty"`
	Options   []FieldOption `json:"options,omitempty"`
}

// FieldOption is one choice of a select field.
type FieldOption struct {
	Value       string `json:"value"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// InteractionRequestBinding names the exact run and interaction a request
// belongs to. A response's InteractionBinding is this plus the request's
// digest.
type InteractionRequestBinding struct {
	RunID         string `json:"runId"`
	Provider      string `json:"provider"`
	EnvironmentID string `json:"environmentId"`
	SessionID     string `json:"sessionId"`
	ExecutionID   string `json:"executionId"`
	InteractionID string `json:"interactionId"`
}

// ResponseBinding is the binding a response command to r carries.
func (r InteractionRequest) ResponseBinding() InteractionBinding {
	b := r.Binding
	return InteractionBinding{RunID: b.RunID, Provider: b.Provider, EnvironmentID: b.EnvironmentID, SessionID: b.SessionID,
		ExecutionID: b.ExecutionID, InteractionID: b.InteractionID, RequestDigest: r.RequestDigest}
}

// PermissionAnswerSpec is the answer of a permission interaction that may
// be allowed for this interaction only: a required select "grant"
// (allow_once or deny) and, with feedback, an optional free-text
// "feedback".
func PermissionAnswerSpec(feedback bool) AnswerSpec {
	s := AnswerSpec{Fields: []InteractionField{
		{Name: PermissionGrantField, Label: "Decision", Type: FieldSelect, Required: true,
			Options: []FieldOption{{Value: GrantAllowOnce, Label: "Allow once"}, {Value: GrantDeny, Label: "Deny"}}},
	}}
	if feedback {
		s.Fields = append(s.Fields, InteractionField{Name: PermissionFeedbackField, Label: "Feedback (optional)", Type: FieldText, Multiline: true})
	}
	return s
}

// InteractionRequestDigest is "sha256:<hex>" of the canonical JSON
// (RFC 8785: sorted keys, ECMAScript string and number forms) of r without
// its RequestDigest, as the TypeScript agent interface computes it.
func InteractionRequestDigest(r InteractionRequest) (string, error) {
	r.RequestDigest = ""
	raw, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("interaction request digest: %w", err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return "", fmt.Errorf("interaction request digest: %w", err)
	}
	delete(generic, "requestDigest")
	return Digest(generic)
}

// ErrInvalidAnswer is wrapped by PermissionDecision for a response that
// does not fit its request.
var ErrInvalidAnswer = errors.New("invalid interaction answer")

// PermissionDecision reads the decision a response to a permission
// request makes: allow, and the user's feedback (for a refusal). An
// accepted response grants what its "grant" field selects; one without
// data is taken as allow_once. Declined and cancelled responses refuse
// and may carry no data. A response that does not fit the request's
// answer spec is ErrInvalidAnswer.
func PermissionDecision(req InteractionRequest, resp InteractionResponse) (allow bool, feedback string, err error) {
	if len(req.AllowedOutcomes) > 0 && !slices.Contains(req.AllowedOutcomes, resp.Outcome) {
		return false, "", fmt.Errorf("%w: outcome %q is not allowed", ErrInvalidAnswer, resp.Outcome)
	}
	var data map[string]json.RawMessage
	if len(resp.Data) > 0 && string(resp.Data) != "null" {
		if err := json.Unmarshal(resp.Data, &data); err != nil || data == nil {
			return false, "", fmt.Errorf("%w: data must be an object", ErrInvalidAnswer)
		}
	}
	switch resp.Outcome {
	case OutcomeDeclined, OutcomeCancelled:
		if len(data) > 0 {
			return false, "", fmt.Errorf("%w: a %s response cannot carry answer fields", ErrInvalidAnswer, resp.Outcome)
		}
		return false, "", nil
	case OutcomeAccepted:
	default:
		return false, "", fmt.Errorf("%w: outcome must be accepted, declined or cancelled", ErrInvalidAnswer)
	}
	if len(data) == 0 {
		return true, "", nil
	}
	var grant string
	for name, v := range data {
		f := slices.IndexFunc(req.AnswerSpec.Fields, func(f InteractionField) bool { return f.Name == name })
		if f < 0 {
			return false, "", fmt.Errorf("%w: unknown field %q", ErrInvalidAnswer, name)
		}
		switch field := req.AnswerSpec.Fields[f]; field.Type {
		case FieldSelect:
			var picked []string
			if err := json.Unmarshal(v, &picked); err != nil || len(picked) != 1 ||
				!slices.ContainsFunc(field.Options, func(o FieldOption) bool { return o.Value == picked[0] }) {
				return false, "", fmt.Errorf("%w: field %q must select exactly one of its options", ErrInvalidAnswer, name)
			}
			if name == PermissionGrantField {
				grant = picked[0]
			}
		case FieldText:
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return false, "", fmt.Errorf("%w: field %q must be a string", ErrInvalidAnswer, name)
			}
			if name == PermissionFeedbackField {
				feedback = s
			}
		default:
			return false, "", fmt.Errorf("%w: field %q has an unsupported type", ErrInvalidAnswer, name)
		}
	}
	switch grant {
	case GrantAllowOnce:
		return true, feedback, nil
	case GrantDeny:
		return false, feedback, nil
	default:
		return false, "", fmt.Errorf("%w: a permission response must select exactly one %q value", ErrInvalidAnswer, PermissionGrantField)
	}
}

// Bounds of the TypeScript agent interface's contract values, in UTF-16
// code units as JavaScript counts string length.
const (
	// MaxContractString is the longest string value.
	MaxContractString = 16_384
	// MaxContractIdentifier is the longest identifier (an id, a name, a
	// JSON object key).
	MaxContractIdentifier = 512
	// MaxContractArray is the longest array (of events of a turn result,
	// among others).
	// maxContractDepth, maxContractNodes, maxContractBytes,
	// MaxContractArray and maxContractMap bound a JSON value.
	maxContractDepth = 16
	maxContractNodes = 8_192
	maxContractBytes = 1 << 20
	MaxContractArray = 1_024
	maxContractMap   = 256
)

// BoundedJSON reports whether raw is a JSON value within the agent
// interface's bounds (depth, node count, size, string and key length,
// array and object size), so that a TypeScript client accepts it inside an
// event. As the interface counts nodes, an array or object counts twice.
func BoundedJSON(raw json.RawMessage) bool {
	if len(raw) > maxContractBytes {
		return false
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	nodes := 0
	var walk func(v any, depth int) bool
	walk = func(v any, depth int) bool {
		nodes++
		if nodes > maxContractNodes {
			return false
		}
		switch x := v.(type) {
		case string:
			return JSLength(x) <= MaxContractString
		case []any:
			nodes++
			if depth >= maxContractDepth || len(x) > MaxContractArray {
				return false
			}
			for _, e := range x {
				if !walk(e, depth+1) {
					return false
				}
			}
		case map[string]any:
			nodes++
			if depth >= maxContractDepth || len(x) > maxContractMap {
				return false
			}
			for k, e := range x {
				if JSLength(k) > MaxContractIdentifier || !walk(e, depth+1) {
					return false
				}
			}
		}
		return true
	}
	return walk(v, 0) && nodes <= maxContractNodes
}

// JSLength is the length of s as JavaScript counts it (UTF-16 code units).
func JSLength(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// TrimJS removes what JavaScript's String.prototype.trim removes from both
// ends of s: white space (including U+00A0, U+FEFF and the Zs spaces) and
// line terminators. The agent interface refuses an identifier that trim
// would change.
func TrimJS(s string) string { return strings.TrimFunc(s, isJSSpace) }

func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', '\u2028', '\u2029', '\ufeff':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// TruncateJS cuts s to at most max UTF-16 code units, on a rune boundary.
func TruncateJS(s string, max int) string {
	n := 0
	for i, r := range s {
		n += utf16.RuneLen(r)
		if n > max {
			return s[:i]
		}
	}
	return s
}

// InteractionCommandDigest is the commandDigest of a response command:
// the canonical digest of {"binding", "response"}, computed as the
// TypeScript agent interface computes it.
func InteractionCommandDigest(b InteractionBinding, r InteractionResponse) (string, error) {
	d, err := Digest(map[string]any{"binding": b, "response": r})
	if err != nil {
		return "", fmt.Errorf("interaction command digest: %w", err)
	}
	return d, nil
}
