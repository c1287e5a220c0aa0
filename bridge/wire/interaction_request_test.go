package wire

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestCanonical_MatchesECMAScript holds the canonical form to what
// JSON.stringify and Array.prototype.sort give in Node 22 for the same
// value (computed with `node`, keys sorted, strings and numbers as
// JavaScript writes them): RFC 8785.
func TestCanonical_MatchesECMAScript(t *testing.T) {
	in := `{"b":[1e21,1e-7,0.000001,123456789012345680000,-0.5,3,2.5e-8],"a":"x\b\f\u0001\u2028\u2029é😀<>&","\uffff":1,"😀":2,"z":{"y":null,"x":true}}`
	c, err := Canonical(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":\"x\\b\\f\\u0001\u2028\u2029é😀<>&\",\"b\":[1e+21,1e-7,0.000001,123456789012345680000,-0.5,3,2.5e-8],\"z\":{\"x\":true,\"y\":null},\"😀\":2,\"\uffff\":1}"
	if string(c) != want {
		t.Errorf("Canonical = %s\nwant        %s", c, want)
	}
	d, err := Digest(json.RawMessage(in))
	if want := "sha256:17054d658aeb2cf1f74e78c263de0079117949f65050f6e7a4eeb787a6b2ba1b"; err != nil || d != want {
		t.Errorf("Digest = %s, %v, want %s", d, err, want)
	}
}

func TestCanonical_Numbers(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {-0.0, "0"}, {1, "1"}, {-1.5, "-1.5"}, {0.1, "0.1"}, {1e20, "100000000000000000000"}, {1e21, "1e+21"},
		{1.25e-6, "0.00000125"}, {1e-7, "1e-7"}, {123.456, "123.456"}, {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
	} {
		if got, err := Canonical(tt.in); err != nil || string(got) != tt.want {
			t.Errorf("Canonical(%v) = %s, %v, want %s", tt.in, got, err, tt.want)
		}
	}
}

func permissionRequest() InteractionRequest {
	return InteractionRequest{ID: "perm-1", Kind: InteractionKindPermission, Title: "Allow Bash to run: ls",
		Subject:    &InteractionSubject{Type: SubjectTool, ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
		AnswerSpec: PermissionAnswerSpec(true), ResponseScopes: []string{ScopeInteraction},
		Binding: InteractionRequestBinding{RunID: "r1", Provider: "p", EnvironmentID: "e", SessionID: "s", ExecutionID: "x", InteractionID: "perm-1"}}
}

func TestInteractionRequestDigest(t *testing.T) {
	r := permissionRequest()
	d1, err := InteractionRequestDigest(r)
	if err != nil || !strings.HasPrefix(d1, "sha256:") || len(d1) != 71 {
		t.Fatalf("InteractionRequestDigest = %q, %v", d1, err)
	}
	r.RequestDigest = d1
	if d2, _ := InteractionRequestDigest(r); d2 != d1 {
		t.Errorf("digest with RequestDigest set = %s, want %s (the field is not part of the material)", d2, d1)
	}
	r.Title += "!"
	if d3, _ := InteractionRequestDigest(r); d3 == d1 {
		t.Error("digest did not change with the title")
	}
	// The wire form is the agent interface's: no empty optionals.
	raw, _ := json.Marshal(permissionRequest())
	for _, absent := range []string{`"body"`, `"allowedOutcomes"`, `"required":false`, `"options":null`, `"command":""`} {
		if strings.Contains(string(raw), absent) {
			t.Errorf("request JSON %s holds %s", raw, absent)
		}
	}
}

func TestPermissionDecision(t *testing.T) {
	req := permissionRequest()
	tests := []struct {
		name      string
		outcome   string
		data      string
		wantAllow bool
		wantFeed  string
		wantErr   bool
	}{
		{"accepted allow_once", OutcomeAccepted, `{"grant":["allow_once"]}`, true, "", false},
		{"accepted without data", OutcomeAccepted, ``, true, "", false},
		{"accepted deny with feedback", OutcomeAccepted, `{"grant":["deny"],"feedback":"not now"}`, false, "not now", false},
		{"declined", OutcomeDeclined, ``, false, "", false},
		{"cancelled", OutcomeCancelled, `null`, false, "", false},
		{"declined with data", OutcomeDeclined, `{"grant":["deny"]}`, false, "", true},
		{"grant not offered", OutcomeAccepted, `{"grant":["allow_always"]}`, false, "", true},
		{"two grants", OutcomeAccepted, `{"grant":["allow_once","deny"]}`, false, "", true},
		{"feedback only", OutcomeAccepted, `{"feedback":"x"}`, false, "", true},
		{"unknown field", OutcomeAccepted, `{"grant":["allow_once"],"other":1}`, false, "", true},
		{"feedback not text", OutcomeAccepted, `{"grant":["deny"],"feedback":3}`, false, "", true},
		{"data not an object", OutcomeAccepted, `[1]`, false, "", true},
		{"unknown outcome", "maybe", ``, false, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allow, feedback, err := PermissionDecision(req, InteractionResponse{ID: req.ID, Outcome: tt.outcome, Data: json.RawMessage(tt.data)})
			if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrInvalidAnswer)) {
				t.Fatalf("PermissionDecision = %v, want error %v (ErrInvalidAnswer)", err, tt.wantErr)
			}
			if err == nil && (allow != tt.wantAllow || feedback != tt.wantFeed) {
				t.Errorf("PermissionDecision = %v %q, want %v %q", allow, feedback, tt.wantAllow, tt.wantFeed)
			}
		})
	}
}

func TestBoundedJSON(t *testing.T) {
	deep := strings.Repeat("[", 17) + strings.Repeat("]", 17)
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"object", `{"command":"ls","n":[1,2,{"a":null}]}`, true},
		{"string at the limit", `{"s":"` + strings.Repeat("a", MaxContractString) + `"}`, true},
		{"string over the limit", `{"s":"` + strings.Repeat("a", MaxContractString+1) + `"}`, false},
		{"astral runes count twice", `{"s":"` + strings.Repeat("😀", MaxContractString/2+1) + `"}`, false},
		{"too deep", deep, false},
		{"too many nodes", "[" + strings.Repeat("1,", maxContractNodes) + "1]", false},
		{"nodes at the limit", "[" + strings.Repeat("["+strings.Repeat("1,", 1023)+"1],", 7) + "[]]", true},
		{"containers count twice", "[" + strings.TrimSuffix(strings.Repeat("["+strings.Repeat("[],", 511)+"[]],", 8), ",") + "]", false},
		{"array at the limit", "[" + strings.Repeat("1,", MaxContractArray-1) + "1]", true},
		{"array over the limit", "[" + strings.Repeat("1,", MaxContractArray) + "1]", false},
		{"key at the limit", `{"` + strings.Repeat("k", MaxContractIdentifier) + `":1}`, true},
		{"key over the limit", `{"` + strings.Repeat("k", MaxContractIdentifier+1) + `":1}`, false},
		{"object at the limit", jsonObject(maxContractMap), true},
		{"object over the limit", jsonObject(maxContractMap + 1), false},
		{"not json", `{`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BoundedJSON(json.RawMessage(tt.in)); got != tt.want {
				t.Errorf("BoundedJSON = %v, want %v", got, tt.want)
			}
		})
	}
	if got := TruncateJS("ab😀c", 3); got != "ab" {
		t.Errorf("TruncateJS = %q, want %q", got, "ab")
	}
}

// jsonObject is an object of n keys.
func jsonObject(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = `"k` + strconv.Itoa(i) + `":1`
	}
	return "{" + strings.Join(keys, ",") + "}"
}

// TestValidIdentifier_outerSpace refuses what JavaScript's trim would
// change, since the agent interface refuses such an identifier.
func TestValidIdentifier_outerSpace(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"ses_1", true},
		{"a b", true},
		{"\u00a0a\u00a0b", false},
		{"a\ufeff", false},
		{"\u3000a", false},
		{"a\u2028", false},
		{" a", false},
		{"a\t", false},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			if got := ValidIdentifier(tt.in) == nil; got != tt.want {
				t.Errorf("ValidIdentifier(%q) = %v, want valid %v", tt.in, ValidIdentifier(tt.in), tt.want)
			}
		})
	}
}
