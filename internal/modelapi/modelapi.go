// Package modelapi knows the model APIs the harnesses speak, as both the
// local model endpoint (internal/routerstub) and the credential broker
// (provider/sandbox/broker) see a request: which API family a method and
// path address, and where a request presents its key.
package modelapi

import (
	"net/http"
	"strings"
)

// Family names the model API a request was addressed to.
type Family string

// API families.
const (
	FamilyNone      Family = ""
	FamilyAnthropic Family = "anthropic-messages"
	FamilyResponses Family = "openai-responses"
	FamilyChat      Family = "openai-chat"
	FamilyGemini    Family = "google-gemini"
)

// Route returns the family a request addresses and whether it only counts
// tokens; FamilyNone for any other route.
func Route(method, path string) (f Family, count bool) {
	if method != http.MethodPost {
		return FamilyNone, false
	}
	switch path {
	case "/v1/messages":
		return FamilyAnthropic, false
	case "/v1/messages/count_tokens":
		return FamilyAnthropic, true
	case "/v1/responses", "/responses":
		return FamilyResponses, false
	case "/v1/chat/completions", "/chat/completions":
		return FamilyChat, false
	}
	if ok, count := geminiRoute(path); ok {
		return FamilyGemini, count
	}
	return FamilyNone, false
}

// geminiRoute reports a POST path of Gemini's generateContent,
// streamGenerateContent or countTokens.
func geminiRoute(path string) (ok, count bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return false, false
	}
	model, verb, found := strings.Cut(rest, ":")
	if !found || model == "" || strings.Contains(model, "/") {
		return false, false
	}
	switch verb {
	case "generateContent", "streamGenerateContent":
		return true, false
	case "countTokens":
		return true, true
	}
	return false, false
}

// AuthKind is where a request presents its key.
type AuthKind string

// The ways a request can present a key.
const (
	AuthNone       AuthKind = ""
	AuthAPIKey     AuthKind = "x-api-key"
	AuthBearer     AuthKind = "bearer"
	AuthGoogAPIKey AuthKind = "x-goog-api-key"
	// AuthGoogQuery is Gemini's ?key= query parameter.
	AuthGoogQuery AuthKind = "key-query"
)

// PresentedKey finds the key r presents: x-api-key, then Authorization:
// Bearer, then x-goog-api-key, then the key query parameter.
func PresentedKey(r *http.Request) (AuthKind, string) {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return AuthAPIKey, k
	}
	if v := r.Header.Get("Authorization"); v != "" {
		scheme, token, ok := strings.Cut(v, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return AuthBearer, strings.TrimSpace(token)
		}
	}
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return AuthGoogAPIKey, k
	}
	if k := r.URL.Query().Get("key"); k != "" {
		return AuthGoogQuery, k
	}
	return AuthNone, ""
}

// authHeaders are where a request may present a key.
var authHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Proxy-Authorization"}

// ReplaceKey removes every key r presents (the headers PresentedKey reads,
// Proxy-Authorization, the key query parameter) and presents key instead,
// the way kind says (AuthNone: Authorization: Bearer).
func ReplaceKey(r *http.Request, kind AuthKind, key string) {
	q := r.URL.Query()
	q.Del("key")
	for _, h := range authHeaders {
		r.Header.Del(h)
	}
	switch kind {
	case AuthAPIKey:
		r.Header.Set("X-Api-Key", key)
	case AuthGoogAPIKey:
		r.Header.Set("X-Goog-Api-Key", key)
	case AuthGoogQuery:
		q.Set("key", key)
	default:
		r.Header.Set("Authorization", "Bearer "+key)
	}
	r.URL.RawQuery = q.Encode()
}
