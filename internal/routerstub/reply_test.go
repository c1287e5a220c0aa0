package routerstub

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"abcdef", 3, []string{"ab", "cd", "ef"}},
		{"abcde", 2, []string{"ab", "cde"}},
		{"abc", 10, []string{"a", "b", "c"}},
		{"abc", 0, []string{"abc"}},
		{"", 4, []string{""}},
		{"äöü€", 2, []string{"äö", "ü€"}},
	}
	for _, tt := range tests {
		got := split(tt.s, tt.n)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("split(%q, %d) (-want +got):\n%s", tt.s, tt.n, diff)
		}
		if strings.Join(got, "") != tt.s {
			t.Errorf("split(%q, %d) does not join back", tt.s, tt.n)
		}
	}
}

func TestReply_String(t *testing.T) {
	tests := []struct {
		r    Reply
		want string
	}{
		{Text("hi"), `text "hi" in 1 deltas`},
		{Deltas("hello", 2).After(time.Second), `text "hello" in 2 deltas after 1s`},
		{Join(Thinking("t"), ToolCall("Bash", `{"command":"ls"}`)), `thinking "t" + tool Bash {"command":"ls"}`},
		{Error(429, "slow"), `error 429 "slow"`},
		{Stall(0), "stall"},
		{Reply{}, "empty"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestReply_OutputTokens(t *testing.T) {
	r := Join(Text("12345"), ToolCall("Bash", `{"a":1}`))
	if got, want := r.outputTokens(), 2+1+2; got != want {
		t.Errorf("outputTokens() = %d, want %d", got, want)
	}
}

func TestToolCall_BadArgs(t *testing.T) {
	for _, args := range []string{"", "[1]", "null", "{"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("ToolCall(%q) did not panic", args)
				}
			}()
			ToolCall("x", args)
		}()
	}
}
