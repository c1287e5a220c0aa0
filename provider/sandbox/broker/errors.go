package broker

import (
	"encoding/json"
	"net/http"

	"github.com/tangle-network/boxctl/internal/modelapi"
)

// writeError answers with the error body of the API family the request
// addressed (or, for none, the family its key's header belongs to), so
// that the harness's own client reads it as its provider's.
func writeError(w http.ResponseWriter, family modelapi.Family, kind modelapi.AuthKind, status int, code Refusal, msg string) {
	if family == modelapi.FamilyNone {
		switch kind {
		case modelapi.AuthAPIKey:
			family = modelapi.FamilyAnthropic
		case modelapi.AuthGoogAPIKey, modelapi.AuthGoogQuery:
			family = modelapi.FamilyGemini
		default:
			family = modelapi.FamilyChat
		}
	}
	var body any
	switch family {
	case modelapi.FamilyAnthropic:
		typ := map[int]string{http.StatusUnauthorized: "authentication_error", http.StatusForbidden: "permission_error",
			http.StatusTooManyRequests: "rate_limit_error", http.StatusRequestEntityTooLarge: "request_too_large",
			http.StatusBadRequest: "invalid_request_error"}[status]
		if typ == "" {
			typ = "api_error"
		}
		body = map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
	case modelapi.FamilyGemini:
		st := map[int]string{http.StatusUnauthorized: "UNAUTHENTICATED", http.StatusForbidden: "PERMISSION_DENIED",
			http.StatusTooManyRequests: "RESOURCE_EXHAUSTED", http.StatusRequestEntityTooLarge: "INVALID_ARGUMENT",
			http.StatusBadRequest: "INVALID_ARGUMENT"}[status]
		if st == "" {
			st = "UNAVAILABLE"
		}
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
	default:
		typ, c := "invalid_request_error", string(code)
		switch status {
		case http.StatusUnauthorized:
			c = "invalid_api_key"
		case http.StatusTooManyRequests:
			typ, c = "requests", "rate_limit_exceeded"
		case http.StatusBadGateway:
			typ = "server_error"
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
