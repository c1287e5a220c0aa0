package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

var validRoles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "developer": true}

// resolveModel finds the backend of a model id: first match wins,
// case-insensitive, on the bare harness name or its "name/" prefix. It
// returns the bare model after the prefix ("" for the harness default).
func (s *Server) resolveModel(model string) (*engine.Backend, string, bool) {
	lower := strings.ToLower(model)
	for _, b := range s.opts.Backends {
		name := strings.ToLower(b.Adapter.Name())
		if lower == name {
			return b, "", true
		}
		if strings.HasPrefix(lower, name+"/") {
			return b, model[len(name)+1:], true
		}
	}
	return nil, "", false
}

// modelNotFound is the error of a model id that names no registered
// harness: not_found_error, as the TypeScript bridge answers it.
func modelNotFound(model string) wire.ErrorBody {
	return wire.ErrorBody{Type: wire.TypeNotFound, Code: wire.CodeModelNotFound,
		Message: fmt.Sprintf("no backend matches model %q; GET /health lists the registered backends", model)}
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	in, bad := s.decodeChat(body, r.Header)
	if bad != nil {
		writeErrorBody(w, *bad)
		return
	}
	req, backend, cursor, digest := in.req, in.backend, in.cursor, in.digest
	w.Header().Set(wire.HeaderBridgeMode, in.mode)
	if h := s.health.probe(r.Context(), backend, false); h.State != wire.BackendReady {
		writeError(w, wire.TypeBackendNotReady, fmt.Sprintf("%s is %s: %s", h.Name, h.State, h.Detail))
		return
	}
	if e := s.admitChat(r.Context(), in.exec, req.Cwd); e != nil {
		writeErrorBody(w, *e)
		return
	}
	// A run without caller coordinates gets the ones the TypeScript bridge
	// gives it, so that every run has its whole identity (and the X-Run-*
	// headers all carry a value): the harness as provider, this bridge's
	// environment, the run as its own session and execution.
	session, provider, environment, execution := req.SessionID, req.Provider, req.EnvironmentID, req.ExecutionID
	if session == "" {
		session = req.RunID
	}
	if provider == "" {
		provider, environment, execution = backend.Adapter.Name(), wire.DefaultEnvironmentID, req.RunID
	}
	run, _, err := s.opts.Engine.Start(r.Context(), engine.StartRequest{
		RunID: req.RunID, Digest: digest, Backend: backend, Model: in.bare, ModelID: req.Model,
		Provider: provider, EnvironmentID: environment, SessionID: session, ExecutionID: execution,
		Messages: req.Messages, Cwd: req.Cwd, Env: req.Env, Effort: req.Effort,
		Confine: in.exec.confine, Timeout: in.exec.timeout,
	})
	switch {
	case errors.Is(err, engine.ErrIdentityConflict):
		setRunHeaders(w, run)
		writeErrorBody(w, wire.ErrorBody{Type: wire.TypeRunIdentityConflict, RunID: req.RunID,
			ExpectedRequestDigest: run.Digest, ReceivedRequestDigest: digest,
			Message: "run id " + req.RunID + " is bound to a different request"})
		return
	case errors.Is(err, engine.ErrSaturated):
		writeError(w, wire.TypeExecutorSaturated, "the bridge is running as many runs as it allows; retry later")
		return
	case errors.Is(err, engine.ErrSessionBusy):
		writeError(w, wire.TypeSessionBusy, "session "+session+" already has a live run")
		return
	case errors.Is(err, engine.ErrClosed):
		writeError(w, wire.TypeServerError, "the bridge is shutting down")
		return
	case err != nil:
		s.log.Error("start run", "run", req.RunID, "err", err)
		writeError(w, wire.TypeServerError, "start run")
		return
	}
	setRunHeaders(w, run)
	if !req.Stream {
		s.complete(w, r, run)
		return
	}
	if run, _, err = s.loadRun(r.Context(), run.ID); err != nil {
		s.writeRunLookupError(w, req.RunID, err)
		return
	}
	if e := cursorError(run, cursor); e != nil {
		writeErrorBody(w, *e)
		return
	}
	s.stream(w, r, run.ID, resultCursor(run, cursor))
}

// complete waits for a run and answers one chat.completion built from its
// stored frames.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, run store.Run) {
	if !s.opts.Engine.Wait(r.Context(), run.ID) {
		return // the client went away; the run goes on
	}
	run, _, err := s.loadRun(r.Context(), run.ID)
	if err != nil {
		s.writeRunLookupError(w, run.ID, err)
		return
	}
	rd := s.opts.Engine.NewReader(run.ID, run.FirstSeq-1)
	defer rd.Close()
	c := wire.Completion{ID: "chatcmpl-" + run.ID, Object: wire.CompletionObject, Created: run.StartedAt.Unix(), Model: run.Model}
	var msg wire.CompletionMessage
	msg.Role = "assistant"
	finish := ""
	for {
		evs, err := rd.Next(r.Context())
		if errors.Is(err, engine.ErrEnd) {
			break
		}
		if err != nil {
			writeError(w, wire.TypeServerError, "read run events")
			return
		}
		for _, ev := range evs {
			var frame struct {
				wire.Chunk
				Error *wire.ErrorBody `json:"error"`
			}
			if json.Unmarshal(ev.Data, &frame) != nil {
				continue
			}
			if frame.Error != nil {
				c.Error, finish = frame.Error, wire.FinishError
			}
			if frame.Usage != nil {
				c.Usage = frame.Usage
			}
			if len(frame.ProviderModels) > 0 {
				c.ProviderModels = frame.ProviderModels
			}
			for _, ch := range frame.Choices {
				msg.Content += ch.Delta.Content
				msg.ReasoningContent += ch.Delta.Reasoning
				msg.ToolCalls = wire.MergeToolCalls(msg.ToolCalls, ch.Delta.ToolCalls)
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
	}
	if run.FirstSeq > 1 && !run.ResultKept && c.Error == nil {
		// Retention dropped the start of a long run: say so rather than
		// pass the tail off as the whole answer.
		c.Error = &wire.ErrorBody{Type: wire.TypeExpiredReplayCursor, RunID: run.ID,
			Message: fmt.Sprintf("events 1..%d of the run are no longer retained; the content is partial", run.FirstSeq-1)}
	}
	if finish == "" {
		finish = wire.FinishError
		if c.Error == nil {
			c.Error = &wire.ErrorBody{Type: wire.TypeServerError, Message: "the run's events are no longer retained"}
		}
	}
	c.Choices = []wire.CompletionChoice{{Index: 0, Message: msg, FinishReason: finish}}
	writeJSON(w, http.StatusOK, c)
}
