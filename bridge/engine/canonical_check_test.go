package engine

import (
	"strings"
	"testing"
)

// TestCheckEnvelope_rejects holds the schema mirror to rejecting what the
// agent interface rejects, so that a frame it passes means something.
func TestCheckEnvelope_rejects(t *testing.T) {
	const head = `{"runId":"r1","eventId":"r1:1","sequence":1,"cursor":"1","occurredAt":"2026-11-30T00:10:10.001Z","receivedAt":"2026-11-30T00:10:10.001Z","event":`
	const part = `{"id":"r1:text:1","sessionID":"s1","messageID":"r1:message","type":"text","text":"hi"}`
	tool := func(state string) string {
		return head + `{"type":"message.part.updated","part":{"id":"r1:tool:1","sessionID":"s1","messageID":"r1:message","type":"tool","tool":"Bash","state":` + state + `}}}`
	}
	long := strings.Repeat("a", zMaxString+1)
	tests := []struct {
		name, frame string
		want        string // in the error; "" for a frame that passes
	}{
		{"text part", head + `{"type":"message.part.updated","part":` + part + `,"delta":"hi"}}`, ""},
		{"renamed envelope key", strings.Replace(head, `"runId"`, `"runID"`, 1) + `{"type":"status","status":"started"}}`, `"runId" missing`},
		{"unknown envelope key", `{"extra":1,` + head[1:] + `{"type":"status","status":"started"}}`, `unknown key "extra"`},
		{"no receivedAt", strings.Replace(head, `,"receivedAt":"2026-11-30T00:10:10.001Z"`, ``, 1) + `{"type":"status","status":"started"}}`, `"receivedAt" missing`},
		{"negative sequence", strings.Replace(head, `"sequence":1`, `"sequence":-1`, 1) + `{"type":"status","status":"started"}}`, "non-negative"},
		{"fractional sequence", strings.Replace(head, `"sequence":1`, `"sequence":1.5`, 1) + `{"type":"status","status":"started"}}`, "non-negative"},
		{"offset timestamp", strings.Replace(head, `10.001Z","event"`, `10.001+02:00","event"`, 1) + `{"type":"status","status":"started"}}`, "not an ISO datetime"},
		{"unknown status", head + `{"type":"status","status":"done"}}`, `"done" is not a status`},
		{"event type the bridge does not emit", head + `{"type":"usage"}}`, `"usage" is not a member`},
		{"part with a renamed key", head + `{"type":"message.part.updated","part":` + strings.Replace(part, "sessionID", "sessionId", 1) + `}}`, `"sessionID" missing`},
		{"text past the bound", head + `{"type":"message.part.updated","part":` + strings.Replace(part, `"hi"`, `"`+long+`"`, 1) + `}}`, "more than 16384"},
		// Stricter than zod 4.6, which counts a string schema's length in
		// code points; the JSON bounds count UTF-16 units, as the encoder does.
		{"astral text past the bound in UTF-16 units", head + `{"type":"message.part.updated","part":` + strings.Replace(part, `"hi"`, `"`+strings.Repeat("😀", zMaxString/2)+`a"`, 1) + `}}`, "more than 16384"},
		{"tool name with outer space", strings.Replace(tool(`{"status":"running","input":{}}`), `"Bash"`, `"Bash\u00a0"`, 1), "outer whitespace"},
		{"completed without output", tool(`{"status":"completed","input":{}}`), `"output" missing`},
		{"pending with output", tool(`{"status":"pending","input":{},"output":"x"}`), `unknown key "output"`},
		{"input not an object", tool(`{"status":"running","input":[1]}`), "not an object"},
		{"input with a long key", tool(`{"status":"running","input":{"` + strings.Repeat("k", 513) + `":1}}`), "key of 513"},
		{"input too wide", tool(`{"status":"running","input":{"a":[` + strings.Repeat("1,", zMaxArray) + `1]}}`), "array of 1025"},
		{"raw without backend", head + `{"type":"raw","event":{}}}`, `"backend" missing`},
		{"warning code with space", head + `{"type":"warning","code":"cut off","message":"m"}}`, ""},
		{"warning code with outer space", head + `{"type":"warning","code":" cut","message":"m"}}`, "outer whitespace"},
		{"interaction.cancel without id", head + `{"type":"interaction.cancel","reason":"x"}}`, `"id" missing`},
		{"interaction with an empty provider", head + `{"type":"interaction","request":{"id":"p1","kind":"permission","title":"t","answerSpec":{"fields":[]},` +
			`"binding":{"runId":"r1","provider":"","environmentId":"e","sessionId":"s","executionId":"x","interactionId":"p1"},"requestDigest":"sha256:` + strings.Repeat("0", 64) + `"}}}`,
			"binding provider: empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkEnvelope([]byte(tt.frame))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("checkEnvelope = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("checkEnvelope = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
