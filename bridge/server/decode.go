package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Request bodies. Every route that takes a JSON body decodes it with
// decodeStrict (readJSON and decodeJSON answer its failure) but the chat
// completions route, which takes the OpenAI body as it comes, unknown
// fields too (decodeChat).

// decodeStrict decodes a JSON object into v, rejecting unknown fields and
// trailing data. It returns the object as a generic map too.
func decodeStrict(body []byte, v any) (map[string]any, error) {
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil || generic == nil {
		return nil, errors.New("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, err
	}
	return generic, nil
}

// readJSON reads the request body and decodes it strictly into v; generic
// is the body as a JSON object. It has answered 400 "invalid <what>: why"
// when ok is false.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any, what string) (generic map[string]any, ok bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil, false
	}
	return decodeJSON(w, body, v, what)
}

// decodeJSON is readJSON of a body read already.
func decodeJSON(w http.ResponseWriter, body []byte, v any, what string) (generic map[string]any, ok bool) {
	generic, err := decodeStrict(body, v)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, "invalid "+what+": "+err.Error())
		return nil, false
	}
	return generic, true
}

// chatInput is a decoded and validated chat request.
type chatInput struct {
	req     wire.ChatRequest
	backend *engine.Backend
	// bare is the model after the harness prefix ("" for its default).
	bare string
	// cursor is the replay cursor of the request's Last-Event-ID headers.
	cursor int64
	// digest is the request digest the run id is bound to.
	digest string
	// exec is the request's execution object.
	exec execution
	// mode is the request's bridge mode (wire.ModeBYOB).
	mode string
}

// chatMode is a chat request's bridge mode: its mode field, else the
// X-Bridge-Mode header, else hosted-sandboxed for X-Sandbox: 1, else
// byob. The hosted modes are refused: this bridge does not enforce them.
func chatMode(body string, h http.Header) (string, *wire.ErrorBody) {
	mode := strings.ToLower(strings.TrimSpace(body))
	if mode == "" {
		mode = strings.ToLower(strings.TrimSpace(h.Get(wire.HeaderBridgeMode)))
	}
	if mode == "" {
		switch strings.ToLower(strings.TrimSpace(h.Get(wire.HeaderSandbox))) {
		case "1", "true", "yes":
			mode = wire.ModeHostedSandboxed
		}
	}
	switch mode {
	case "", wire.ModeBYOB:
		return wire.ModeBYOB, nil
	case wire.ModeHostedSafe, wire.ModeHostedSandboxed:
		return "", &wire.ErrorBody{Type: wire.TypeNotConfigured, Status: wire.StatusFor(wire.TypeNotConfigured),
			Message: fmt.Sprintf("bridge mode %q is not enforced here; run the bridge inside a box and use byob", mode)}
	}
	return "", &wire.ErrorBody{Type: wire.TypeInvalidRequest, Status: wire.StatusFor(wire.TypeInvalidRequest),
		Message: fmt.Sprintf("invalid bridge mode %q: expected one of byob, hosted-safe, hosted-sandboxed", mode)}
}

// decodeChat decodes and validates the body and headers of POST
// /v1/chat/completions. It touches no run state, so any input may be
// thrown at it (see FuzzDecodeChat): it answers a chat input or the
// error to send.
func (s *Server) decodeChat(body []byte, h http.Header) (chatInput, *wire.ErrorBody) {
	bad := func(typ, msg string) (chatInput, *wire.ErrorBody) {
		return chatInput{}, &wire.ErrorBody{Type: typ, Message: msg, Status: wire.StatusFor(typ)}
	}
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil || generic == nil {
		return bad(wire.TypeInvalidRequest, "request body must be a JSON object")
	}
	var req wire.ChatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return bad(wire.TypeInvalidRequest, "invalid chat request: "+err.Error())
	}
	if msg := validateChat(&req); msg != "" {
		return bad(wire.TypeInvalidRequest, msg)
	}
	exec, eb := parseExecution(req.Execution)
	if eb != nil {
		return bad(eb.Type, eb.Message)
	}
	mode, eb := chatMode(req.Mode, h)
	if eb != nil {
		return chatInput{}, eb
	}
	backend, bare, found := s.resolveModel(req.Model)
	if !found {
		e := modelNotFound(req.Model)
		e.Status = wire.StatusFor(e.Type)
		return chatInput{}, &e
	}
	// Session id: body and header must agree; the header is folded into
	// the body so it is part of the request digest.
	if hs := h.Get(wire.HeaderSessionID); hs != "" {
		if req.SessionID != "" && req.SessionID != hs {
			return bad(wire.TypeInvalidRequest, "session_id and X-Session-Id must match when both are provided")
		}
		req.SessionID = hs
		generic["session_id"] = hs
	}
	if hr := h.Get(wire.HeaderRunID); hr != "" {
		if req.RunID != "" && req.RunID != hr {
			return bad(wire.TypeInvalidRequest, "run_id and X-Run-Id must match when both are provided")
		}
		req.RunID = hr
	}
	if req.RunID == "" {
		req.RunID = wire.NewID("run_")
	}
	if err := wire.ValidRunID(req.RunID); err != nil {
		return bad(wire.TypeInvalidRequest, err.Error())
	}
	for _, f := range []struct{ name, v string }{{"session_id", req.SessionID}, {"provider", req.Provider},
		{"environment_id", req.EnvironmentID}, {"execution_id", req.ExecutionID}} {
		if f.v == "" {
			continue
		}
		if err := wire.ValidIdentifier(f.v); err != nil {
			return bad(wire.TypeInvalidRequest, f.name+" "+err.Error())
		}
	}
	if n := countSet(req.Provider, req.EnvironmentID, req.ExecutionID); n != 0 && n != 3 {
		return bad(wire.TypeInvalidRequest, "provider, environment_id and execution_id must be given all together or not at all")
	}
	cursor, err := wire.ParseCursor(h.Get(wire.HeaderLastEventID), h.Get(wire.HeaderXLastEventID))
	if err != nil {
		return bad(wire.TypeInvalidRequest, err.Error())
	}
	digest, err := wire.RequestDigest(backend.Adapter.Name(), generic)
	if err != nil {
		return bad(wire.TypeInvalidRequest, err.Error())
	}
	return chatInput{req: req, backend: backend, bare: bare, cursor: cursor, digest: digest, exec: exec, mode: mode}, nil
}

func countSet(vs ...string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}

func validateChat(req *wire.ChatRequest) string {
	if strings.TrimSpace(req.Model) == "" {
		return "model is required"
	}
	if len(req.Messages) == 0 {
		return "messages must be a non-empty array"
	}
	for i, m := range req.Messages {
		if !validRoles[m.Role] {
			return fmt.Sprintf("messages[%d].role %q is not one of system, user, assistant, tool", i, m.Role)
		}
		c := trimSpace(m.Content)
		if len(c) > 0 && c[0] != '"' && c[0] != '[' && string(c) != "null" {
			return fmt.Sprintf("messages[%d].content must be a string, an array of parts or null", i)
		}
	}
	if req.Cwd != "" {
		if !filepath.IsAbs(req.Cwd) {
			return "cwd must be an absolute path"
		}
		if fi, err := os.Stat(req.Cwd); err != nil || !fi.IsDir() {
			return "cwd " + req.Cwd + " is not a directory"
		}
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Sprintf("env name %q is invalid", k)
		}
	}
	return ""
}
