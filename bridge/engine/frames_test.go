package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestChunker_DeltaFrameMatchesJSON holds the hand-encoded delta chunks to
// the bytes encoding/json gives for the same chunk.
func TestChunker_DeltaFrameMatchesJSON(t *testing.T) {
	texts := []string{"Hello", " <b>&amp;</b> ", "quote \" backslash \\ newline \n tab \t", "\u2028\u2029 ünïcødé 🙂",
		"invalid \xff\xfe utf-8", "\x00\x01\x1f control", `{"json":"inside"}`}
	for _, kind := range []harness.EventKind{harness.KindText, harness.KindReasoning} {
		c := &chunker{id: "chatcmpl-run<1>", model: "claude-code/son&net", created: 1700000000}
		c.appendFrames(nil, harness.Event{Kind: kind, Text: "first"}) // carries the role
		for _, text := range texts {
			got := c.appendFrames(nil, harness.Event{Kind: kind, Text: text})
			d := wire.Delta{Content: text}
			if kind == harness.KindReasoning {
				d = wire.Delta{Reasoning: text}
			}
			want := wire.MustJSON(wire.Chunk{ID: c.id, Object: wire.ChunkObject, Created: c.created, Model: c.model,
				Choices: []wire.ChunkChoice{{Index: 0, Delta: d}}})
			if len(got) != 1 {
				t.Fatalf("frames(%d, %q) = %d frames, want 1", kind, text, len(got))
			}
			if diff := cmp.Diff(string(want), string(got[0])); diff != "" {
				t.Errorf("frames(%d, %q) (-json +fast):\n%s", kind, text, diff)
			}
		}
	}
}

// FuzzAppendJSONString holds appendJSONString to encoding/json's bytes
// for the same string.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `"\`, "<>&", "\b\f\n\r\t\x00\x1f\x7f", "\u2028\u2029\u2027",
		"é🙂", "\xff", "a\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := wire.MustJSON(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got[1:], want)
		}
	})
}
