package sandbox

import "testing"

func TestDefaultModel(t *testing.T) {
	tests := []struct {
		harness, upstream, want string
	}{
		{"claude-code", "anthropic", ""},
		{"codex", "openai", ""},
		{"gemini", "gemini", ""},
		{"pi", "", "anthropic/claude-sonnet-4-5"},
		{"pi", "router-1a2b3c4d", "anthropic/claude-sonnet-4-5"},
		{"pi", "local-run-abc", "anthropic/claude-sonnet-4-5"},
		{"pi", "anthropic", "anthropic/claude-sonnet-4-5"},
		{"pi", "openai", "openai/gpt-5.5"},
		{"opencode", "openai-1a2b3c4d", "openai/gpt-5.5"},
		{"opencode", "gemini", ""},
	}
	for _, tt := range tests {
		if got := defaultModel(tt.harness, tt.upstream); got != tt.want {
			t.Errorf("defaultModel(%q, %q) = %q, want %q", tt.harness, tt.upstream, got, tt.want)
		}
	}
}
