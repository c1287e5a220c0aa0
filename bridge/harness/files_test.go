package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a", "b", "config.toml")
	if err := os.MkdirAll(filepath.Dir(a), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, []byte("old contents, longer than the new"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: a, Data: []byte("new")}, {Path: filepath.Join(dir, "c", "models.json"), Data: []byte("{}")}}
	if err := WriteFiles(files); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(f.Path)
		if err != nil || string(got) != string(f.Data) {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", f.Path, got, err, f.Data)
		}
		if fi, err := os.Stat(f.Path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode of %s = %v, %v; want 0600", f.Path, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "c")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("mode of a new directory = %v, %v; want 0700", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(a))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file (no temporary left)", len(entries))
	}
	if err := WriteFiles([]File{{Path: "relative.txt"}}); err == nil {
		t.Error("WriteFiles(relative path) = nil, want an error")
	}
}

func msg(role, text string) wire.Message {
	b, _ := json.Marshal(text)
	return wire.Message{Role: role, Content: b}
}

func TestSplitPrompt(t *testing.T) {
	tests := []struct {
		name               string
		turn               Turn
		prompt, wantSystem string
	}{
		{"one message", Turn{Messages: []wire.Message{msg("user", "hi")}}, "hi", ""},
		{"system and developer", Turn{Messages: []wire.Message{msg("system", "a"), msg("developer", "b"), msg("user", "hi")}}, "hi", "a\n\nb"},
		{"new session gets the transcript", Turn{Messages: []wire.Message{msg("user", "one"), msg("assistant", "two"), msg("user", "three")}},
			"<previous_conversation>\nuser: one\nassistant: two\n</previous_conversation>\n\nthree", ""},
		{"continued session gets the last message", Turn{NativeSessionID: "s", Messages: []wire.Message{msg("user", "one"), msg("assistant", "two"), msg("user", "three")}},
			"three", ""},
		{"no user message", Turn{Messages: []wire.Message{msg("system", "a")}}, "", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prompt, system := SplitPrompt(tt.turn)
			if diff := cmp.Diff([]string{tt.prompt, tt.wantSystem}, []string{prompt, system}); diff != "" {
				t.Errorf("SplitPrompt() (-want +got):\n%s", diff)
			}
		})
	}
}
