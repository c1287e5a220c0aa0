package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTurnCmd_Flags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    turnOptions
		wantErr string
	}{
		{name: "box and prompt", args: []string{"last", "hello there"}, want: turnOptions{box: "last", prompt: "hello there"}},
		{name: "timeout and model", args: []string{"3f2a", "p", "--timeout", "90s", "--model", "haiku"},
			want: turnOptions{box: "3f2a", prompt: "p", timeout: 90 * time.Second, model: "haiku"}},
		{name: "no prompt", args: []string{"last"}, wantErr: "accepts 2 arg(s)"},
		{name: "empty prompt", args: []string{"last", ""}, wantErr: "the prompt is empty"},
		{name: "negative timeout", args: []string{"last", "p", "--timeout", "-1s"}, wantErr: "want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, called, err := parseCmd(t, newTurnCmd, append([]string{"turn"}, tt.args...)...)
			if tt.wantErr != "" {
				if exitCode(err) != 2 || !strings.Contains(err.Error(), tt.wantErr) || called {
					t.Fatalf("turn %v: error %v (exit %d), want exit 2 containing %q", tt.args, err, exitCode(err), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *o, cmp.AllowUnexported(turnOptions{})); diff != "" {
				t.Errorf("turn %v options (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}
