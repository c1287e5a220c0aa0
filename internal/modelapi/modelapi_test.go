package modelapi

import (
	"net/http/httptest"
	"testing"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		method, path string
		want         Family
		count        bool
	}{
		{"POST", "/v1/messages", FamilyAnthropic, false},
		{"POST", "/v1/messages/count_tokens", FamilyAnthropic, true},
		{"POST", "/v1/responses", FamilyResponses, false},
		{"POST", "/responses", FamilyResponses, false},
		{"POST", "/v1/chat/completions", FamilyChat, false},
		{"POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", FamilyGemini, false},
		{"POST", "/v1beta/models/g:countTokens", FamilyGemini, true},
		{"POST", "/v1beta/models/a/b:generateContent", FamilyNone, false},
		{"POST", "/v1beta/models/g:embedContent", FamilyNone, false},
		{"GET", "/v1/messages", FamilyNone, false},
		{"POST", "/v1/files", FamilyNone, false},
	}
	for _, tt := range tests {
		if f, c := Route(tt.method, tt.path); f != tt.want || c != tt.count {
			t.Errorf("Route(%s %s) = %q %v, want %q %v", tt.method, tt.path, f, c, tt.want, tt.count)
		}
	}
}

func TestPresentedKey(t *testing.T) {
	tests := []struct {
		name, header, value, query string
		want                       AuthKind
		key                        string
	}{
		{"x-api-key", "X-Api-Key", "k1", "", AuthAPIKey, "k1"},
		{"bearer", "Authorization", "Bearer  k2 ", "", AuthBearer, "k2"},
		{"basic is none", "Authorization", "Basic abc", "", AuthNone, ""},
		{"goog header", "X-Goog-Api-Key", "k3", "", AuthGoogAPIKey, "k3"},
		{"goog query", "", "", "key=k4", AuthGoogQuery, "k4"},
		{"nothing", "", "", "", AuthNone, ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/v1/messages?"+tt.query, nil)
		if tt.header != "" {
			r.Header.Set(tt.header, tt.value)
		}
		if k, v := PresentedKey(r); k != tt.want || v != tt.key {
			t.Errorf("%s: PresentedKey = %q %q, want %q %q", tt.name, k, v, tt.want, tt.key)
		}
	}
}
