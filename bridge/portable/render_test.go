package portable

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

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
	goldentest.Check(t, filepath.Join("testdata", "context-prompt.golden"), []byte(Render(c)))
}
