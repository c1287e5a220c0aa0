package provider

import (
	"encoding/json"
	"testing"
)

// TestCheckPart pins the message parts a canonical stream may carry: the
// bridge's shapes pass, and a part the agent interface's schema would
// reject is a protocol error.
func TestCheckPart(t *testing.T) {
	for _, tt := range []struct {
		name, event string
		ok          bool
	}{
		{"text", `{"type":"message.part.updated","delta":"lo","part":{"id":"p","sessionID":"s","messageID":"m","type":"text","text":"Hello"}}`, true},
		{"reasoning", `{"type":"message.part.updated","delta":"x","part":{"id":"p","sessionID":"s","messageID":"m","type":"reasoning","text":"x"}}`, true},
		{"running tool", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool","tool":"bash","callID":"c",
			"state":{"status":"running","input":{"command":"ls"}}}}`, true},
		{"completed tool", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool","tool":"bash",
			"state":{"status":"completed","input":{},"output":""}}}`, true},
		{"failed tool", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool","tool":"bash",
			"state":{"status":"error","input":{},"error":"boom"}}}`, true},
		{"no part", `{"type":"message.part.updated"}`, false},
		{"no session", `{"type":"message.part.updated","part":{"id":"p","messageID":"m","type":"text","text":"x"}}`, false},
		{"another session", `{"type":"message.part.updated","part":{"id":"p","sessionID":"other","messageID":"m","type":"text","text":"x"}}`, false},
		{"no message", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","type":"text","text":"x"}}`, false},
		{"text without text", `{"type":"message.part.updated","delta":"x","part":{"id":"p","sessionID":"s","messageID":"m","type":"text"}}`, false},
		{"tool without state", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool","tool":"bash","callID":"c"}}`, false},
		{"tool without name", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool",
			"state":{"status":"running","input":{}}}}`, false},
		{"input not an object", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool","tool":"bash",
			"state":{"status":"running","input":"ls"}}}`, false},
		{"completed without output", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool","tool":"bash",
			"state":{"status":"completed","input":{}}}}`, false},
		{"unknown status", `{"type":"message.part.updated","part":{"id":"p","sessionID":"s","messageID":"m","type":"tool","tool":"bash",
			"state":{"status":"done","input":{}}}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ev struct {
				Part *Part `json:"part"`
			}
			if err := json.Unmarshal([]byte(tt.event), &ev); err != nil {
				t.Fatal(err)
			}
			reason := checkPart(json.RawMessage(tt.event), ev.Part, "s")
			if (reason == "") != tt.ok {
				t.Errorf("checkPart(%s) = %q, want ok %v", tt.event, reason, tt.ok)
			}
		})
	}
}
