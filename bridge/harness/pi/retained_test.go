package pi

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestAdapter_ParseQuestion(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       harness.Question
		ok         bool
	}{
		{"confirm", `{"type":"extension_ui_request","id":"uuid-2","method":"confirm","title":"Run rm -rf build?","message":"It deletes the build.","timeout":5000}`,
			harness.Question{NativeID: "uuid-2", Kind: "permission", Title: "Run rm -rf build?: It deletes the build.", Input: json.RawMessage(`{}`)}, true},
		{"confirm without text", `{"type":"extension_ui_request","id":"u","method":"confirm"}`,
			harness.Question{NativeID: "u", Kind: "permission", Title: "Pi asks for confirmation", Input: json.RawMessage(`{}`)}, true},
		{"the bridge's gate", `{"type":"extension_ui_request","id":"g1","method":"select","title":"Permission: bash {\"command\":\"ls -l\"} [cli-bridge-marker:n0-1]","options":["allow_once","deny"]}`,
			harness.Question{NativeID: "g1", Kind: "permission", Tool: "bash", Title: "Permission: bash", Input: json.RawMessage(`{"command":"ls -l"}`),
				Options: []string{"allow_once", "deny"}}, true},
		{"the TypeScript bridge's gate: no input", `{"type":"extension_ui_request","id":"g2","method":"select","title":"Permission: edit [cli-bridge-marker:n0-2]","options":["allow_once","deny"]}`,
			harness.Question{NativeID: "g2", Kind: "permission", Tool: "edit", Title: "Permission: edit", Input: json.RawMessage(`{}`),
				Options: []string{"allow_once", "deny"}}, true},
		{"the gate with an input that is no object", `{"type":"extension_ui_request","id":"g3","method":"select","title":"Permission: edit [1] [cli-bridge-marker:n0-3]","options":["allow_once","deny"]}`,
			harness.Question{NativeID: "g3", Kind: "permission", Tool: "edit", Title: "Permission: edit", Input: json.RawMessage(`{}`),
				Options: []string{"allow_once", "deny"}}, true},
		{"a confirm with a JSON message", `{"type":"extension_ui_request","id":"u","method":"confirm","title":"t","message":"{\"tool\":\"bash\"}"}`,
			harness.Question{NativeID: "u", Kind: "permission", Title: `t: {"tool":"bash"}`, Input: json.RawMessage(`{}`)}, true},
		{"another select is not a yes/no question", `{"type":"extension_ui_request","id":"u","method":"select","title":"t","options":["a","b"]}`, harness.Question{}, false},
		{"a select with a marker but other choices", `{"type":"extension_ui_request","id":"u","method":"select","title":"Permission: bash [cli-bridge-marker:n0-1]","options":["yes","no"]}`, harness.Question{}, false},
		{"notify is fire-and-forget", `{"type":"extension_ui_request","id":"u","method":"notify","message":"m"}`, harness.Question{}, false},
		{"no id", `{"type":"extension_ui_request","method":"confirm","title":"t"}`, harness.Question{}, false},
		{"an event", `{"type":"agent_end","messages":[]}`, harness.Question{}, false},
		{"not JSON", `extension_ui_request`, harness.Question{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Adapter{}.ParseQuestion([]byte(tt.line))
			if ok != tt.ok {
				t.Fatalf("ParseQuestion(%s) ok = %v, want %v", tt.line, ok, tt.ok)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseQuestion(%s) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestAdapter_Answer(t *testing.T) {
	confirm := harness.Question{NativeID: "uuid-2", Kind: "permission"}
	gated := harness.Question{NativeID: "g1", Kind: "permission", Options: []string{"allow_once", "deny"}}
	for _, tt := range []struct {
		q     harness.Question
		allow bool
		want  string
	}{
		{confirm, true, `{"confirmed":true,"id":"uuid-2","type":"extension_ui_response"}` + "\n"},
		{confirm, false, `{"confirmed":false,"id":"uuid-2","type":"extension_ui_response"}` + "\n"},
		{gated, true, `{"id":"g1","type":"extension_ui_response","value":"allow_once"}` + "\n"},
		{gated, false, `{"id":"g1","type":"extension_ui_response","value":"deny"}` + "\n"},
	} {
		got, err := Adapter{}.Answer(tt.q, tt.allow, "refused")
		if err != nil || string(got) != tt.want {
			t.Errorf("Answer(allow %v) = %s, %v, want %s", tt.allow, got, err, tt.want)
		}
	}
}

// TestGateSource checks the gate a session loads: its nonce written in,
// where the TypeScript bridge's gate declares it, one per session.
func TestGateSource(t *testing.T) {
	a, b := string(gateSource("/state/a")), string(gateSource("/state/b"))
	decl := regexp.MustCompile(`const bridgeNonce = "([0-9a-f]{24})";`)
	ma, mb := decl.FindStringSubmatch(a), decl.FindStringSubmatch(b)
	if ma == nil || mb == nil || ma[1] == mb[1] || strings.Contains(a, "BRIDGE_NONCE") || a != string(gateSource("/state/a")) {
		t.Errorf("gate sources do not each declare one stable nonce of their own:\n%s", a)
	}
}

func TestAdapter_RetainedCommand(t *testing.T) {
	turn := harness.Turn{Bin: "pi", Model: "router/m", StateDir: t.TempDir(), NativeSessionID: "sess-1",
		Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"hello"`)}}}
	got, err := Adapter{}.RetainedCommand(turn)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Adapter{}.Command(turn)
	if err != nil {
		t.Fatal(err)
	}
	gatePath := filepath.Join(turn.StateDir, "agent", "boxctl", "permissions.ts")
	want.Args = append(want.Args, "--extension", gatePath)
	want.Files = append(want.Files, harness.File{Path: gatePath, Data: gateSource(turn.StateDir)})
	slices.Sort(got.Env) // the environment's order is not part of it
	slices.Sort(want.Env)
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b harness.Parser) bool { return a == b })); diff != "" {
		t.Errorf("RetainedCommand is not Command with the permission gate (-want +got):\n%s", diff)
	}
	if !got.HoldStdin || !slices.Contains(got.Args, "--session") {
		t.Errorf("RetainedCommand = %v (hold stdin %v), want the session resumed with stdin held", got.Args, got.HoldStdin)
	}
}

func TestAdapter_Persistent(t *testing.T) {
	turn := harness.Turn{Bin: "pi", Model: "router/m", StateDir: t.TempDir(), NativeSessionID: "sess-1",
		Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"hello"`)}}}
	a := Adapter{}
	sess, err := a.SessionCommand(turn)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := a.Command(turn)
	if err != nil {
		t.Fatal(err)
	}
	input, err := a.TurnInput(turn)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"prompt","message":"hello","type":"prompt"}` + "\n" + `{"id":"state","type":"get_state"}` + "\n"
	if string(input) != want {
		t.Errorf("TurnInput = %q, want %q", input, want)
	}
	if string(fresh.Stdin) != string(input) {
		t.Errorf("Command stdin = %q, want the turn's input %q", fresh.Stdin, input)
	}
	retained, err := a.RetainedCommand(turn)
	if err != nil {
		t.Fatal(err)
	}
	if !sess.HoldStdin || len(sess.Stdin) != 0 || !slices.Equal(sess.Args, retained.Args) || !cmp.Equal(sess.Files, retained.Files) {
		t.Errorf("SessionCommand = %+v, want RetainedCommand's process with an empty held stdin", sess)
	}
	if slices.Contains(fresh.Args, "--extension") {
		t.Errorf("Command (one-shot) = %v, want no permission gate: nobody could answer it", fresh.Args)
	}
	if got := string(a.Interrupt()); got != `{"type":"abort","id":"abort"}`+"\n" {
		t.Errorf("Interrupt = %q", got)
	}
	noText := turn
	noText.Messages = []wire.Message{{Role: "user", Content: json.RawMessage(`"  "`)}}
	if _, err := a.TurnInput(noText); err == nil {
		t.Error("TurnInput of a turn without text succeeded")
	}
	if _, err := a.SessionCommand(harness.Turn{Bin: "pi", Model: "no-slash", StateDir: t.TempDir()}); err == nil {
		t.Error("SessionCommand of a model without a provider succeeded")
	}
}

func TestSteerInput(t *testing.T) {
	line, err := Adapter{}.SteerInput("look at \"main.go\"\nfirst")
	if err != nil {
		t.Fatal(err)
	}
	var cmd struct{ ID, Type, Message string }
	if line[len(line)-1] != '\n' || json.Unmarshal(line, &cmd) != nil || cmd.Type != "steer" || cmd.ID == "" ||
		cmd.Message != "look at \"main.go\"\nfirst" {
		t.Errorf("steer line = %q, want one rpc steer command with the message", line)
	}
}
