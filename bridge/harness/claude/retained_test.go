package claude

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestAdapter_SessionCommand(t *testing.T) {
	turn := harness.Turn{Bin: "/opt/claude", Model: "sonnet", Cwd: "/w", StateDir: "/data/s",
		Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"hello"`)}}}
	tests := []struct {
		name       string
		native     string
		wantResume bool
	}{
		{"new session", "", false},
		{"resumed session", "abc", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := turn
			turn.NativeSessionID = tt.native
			cmd, err := Adapter{}.SessionCommand(turn)
			if err != nil {
				t.Fatal(err)
			}
			if !cmd.HoldStdin || cmd.Stdin == nil || len(cmd.Stdin) != 0 {
				t.Errorf("Stdin, HoldStdin = %q, %v, want an empty held stdin", cmd.Stdin, cmd.HoldStdin)
			}
			for _, flag := range [][2]string{{"--input-format", "stream-json"}, {"--permission-prompt-tool", "stdio"}, {"--model", "sonnet"}} {
				if i := slices.Index(cmd.Args, flag[0]); i < 0 || cmd.Args[i+1] != flag[1] {
					t.Errorf("Args = %q, want %s %s", cmd.Args, flag[0], flag[1])
				}
			}
			if slices.Contains(cmd.Args, "hello") {
				t.Errorf("Args = %q carry the prompt, want it on stdin per turn", cmd.Args)
			}
			i := slices.Index(cmd.Args, "--resume")
			if got := i >= 0 && cmd.Args[i+1] == tt.native; got != tt.wantResume || slices.Contains(cmd.Args, "--session-id") == tt.wantResume {
				t.Errorf("Args = %q, want resume %v", cmd.Args, tt.wantResume)
			}
		})
	}
}

func TestAdapter_TurnInput(t *testing.T) {
	line, err := Adapter{}.TurnInput(harness.Turn{Messages: []wire.Message{{Role: "user", Content: json.RawMessage(`"--flag-like \n text"`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type    string
		Message struct {
			Role    string
			Content []struct{ Type, Text string }
		}
	}
	if line[len(line)-1] != '\n' || json.Unmarshal(line, &got) != nil || got.Type != "user" || got.Message.Role != "user" ||
		len(got.Message.Content) != 1 || got.Message.Content[0].Text != "--flag-like \n text" {
		t.Errorf("TurnInput = %q, want one stream-json user line", line)
	}
	if _, err := (Adapter{}).TurnInput(harness.Turn{}); err == nil {
		t.Error("TurnInput(no message) = nil error, want an error")
	}
	var in struct {
		Type    string
		Request struct{ Subtype string }
	}
	if l := (Adapter{}).Interrupt(); json.Unmarshal(l, &in) != nil || in.Type != "control_request" || in.Request.Subtype != "interrupt" || l[len(l)-1] != '\n' {
		t.Errorf("Interrupt = %q, want a control_request interrupt line", l)
	}
}
