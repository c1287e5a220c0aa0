package portable

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestRender pins the prompt a transferred context becomes.
func TestRender(t *testing.T) {
	part := func(s string) json.RawMessage { return json.RawMessage(s) }
	c := wire.PortableContext{
		Source: wire.ContextSource{RunID: "src-run"},
		Messages: []wire.ContextMessage{
			{ID: "m1", Role: "user", Parts: []json.RawMessage{part(`{"type":"text","text":"Name a colour."}`)}},
			{ID: "m2", Role: "assistant", Parts: []json.RawMessage{part(`{"type":"text","text":"Teal."}`)}},
			{ID: "m4", Role: "user", Parts: []json.RawMessage{part(`{"type":"file","filename":"notes.md","content":"# Notes"}`),
				part(`{"type":"image","filename":"a.png","url":"https://example.test/a.png"}`)}},
		},
	}
	got := Render(c)
	path := filepath.Join("testdata", "context-prompt.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Render (-golden +got):\n%s", diff)
	}
}
