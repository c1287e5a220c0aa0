package sandbox

import (
	"testing"

	"github.com/tangle-network/boxctl/provider"
)

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

// TestFirstModel: the model the bridge starts a harness ahead with is the
// one the first turn's route names after the harness, as the bridge
// reads a route.
func TestFirstModel(t *testing.T) {
	tests := []struct {
		name    string
		profile provider.Profile
		want    string
	}{
		{"harness default", provider.Profile{Harness: "claude-code"}, ""},
		{"a model", provider.Profile{Harness: "claude-code", Model: provider.ProfileModel{Default: "sonnet"}}, "sonnet"},
		{"a route already", provider.Profile{Harness: "claude-code", Model: provider.ProfileModel{Default: "claude-code/opus"}}, "opus"},
		{"provider and model", provider.Profile{Harness: "pi", Model: provider.ProfileModel{Default: "claude-sonnet-4-5", Provider: "anthropic"}}, "anthropic/claude-sonnet-4-5"},
		{"provider/model", provider.Profile{Harness: "opencode", Model: provider.ProfileModel{Default: "openai/gpt-5.5"}}, "openai/gpt-5.5"},
		{"the harness's name", provider.Profile{Harness: "codex", Model: provider.ProfileModel{Default: "codex"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := firstModel(provider.CreateRequest{Profile: tt.profile}); got != tt.want {
				t.Errorf("firstModel = %q, want %q", got, tt.want)
			}
		})
	}
}
