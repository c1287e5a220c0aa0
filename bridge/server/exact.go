package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/exact"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// Exact process environments (package exact): a keyed environment, its
// files under /tmp, and shell-free processes confined by bubblewrap, with
// their status, output and kill; destroying it kills what runs in it.

// exactError answers an error of package exact.
func (s *Server) exactError(w http.ResponseWriter, r *http.Request, err error) {
	var req *exact.RequestError
	switch {
	case errors.As(err, &req):
		writeError(w, wire.TypeInvalidRequest, req.Msg)
	case errors.Is(err, exact.ErrNotFound):
		writeError(w, wire.TypeNotFound, err.Error())
	case errors.Is(err, exact.ErrConflict):
		writeError(w, wire.TypeEnvironmentConflict, err.Error())
	case errors.Is(err, exact.ErrTooLarge):
		writeError(w, wire.TypeFileTooLarge, err.Error())
	case engine.JailErrorType(err) != wire.TypeHarnessUnavailable:
		writeError(w, engine.JailErrorType(err), err.Error())
	case r.Context().Err() != nil:
		// The caller went away; nobody reads an answer.
	default:
		s.log.Error("exact process route", "path", r.URL.Path, "err", err)
		writeError(w, wire.TypeServerError, err.Error())
	}
}

func (s *Server) createExact(w http.ResponseWriter, r *http.Request) {
	var req wire.ExactEnvironmentRequest
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	// The jail is probed again: an environment is made only where its
	// processes can be confined now.
	if err := s.opts.Engine.Exact().Check(r.Context()); err != nil {
		writeError(w, wire.TypeNotConfigured, "exact processes run under bubblewrap, which cannot run here: "+err.Error())
		return
	}
	res, err := s.opts.Engine.Exact().Create(r.Context(), req)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	status := http.StatusCreated
	if res.Status == wire.ExactReplayed {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}

func (s *Server) listExact(w http.ResponseWriter, r *http.Request) {
	var match map[string]json.RawMessage
	if q := r.URL.Query().Get("metadata"); q != "" {
		if err := json.Unmarshal([]byte(q), &match); err != nil || match == nil {
			writeError(w, wire.TypeInvalidRequest, "metadata must be a JSON object")
			return
		}
	}
	envs, err := s.opts.Engine.Exact().List(r.Context(), match)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ExactEnvironmentList{Environments: envs})
}

func (s *Server) getExact(w http.ResponseWriter, r *http.Request) {
	v, err := s.opts.Engine.Exact().Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) destroyExact(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	destroyed, err := s.opts.Engine.Exact().Destroy(r.Context(), id)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	res := wire.ExactDestroyResult{ID: id, Status: "destroyed"}
	if !destroyed {
		res.Status = "already_destroyed"
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) writeExactFile(w http.ResponseWriter, r *http.Request) {
	var req wire.ExactFileWrite
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	data, err := base64.StdEncoding.Strict().DecodeString(req.Content)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, "content must be standard base64: "+err.Error())
		return
	}
	f, err := s.opts.Engine.Exact().WriteFile(r.Context(), r.PathValue("id"), req.Path, req.Mode, data)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (s *Server) readExactFile(w http.ResponseWriter, r *http.Request) {
	var req wire.ExactFileRead
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	f, data, err := s.opts.Engine.Exact().ReadFile(r.Context(), r.PathValue("id"), req.Path, req.MaxBytes)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	f.Content = base64.StdEncoding.EncodeToString(data)
	writeJSON(w, http.StatusOK, f)
}

func (s *Server) spawnExact(w http.ResponseWriter, r *http.Request) {
	var req wire.ExactLaunch
	if _, ok := s.readJSON(w, r, &req, "request"); !ok {
		return
	}
	st, err := s.opts.Engine.Exact().Spawn(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, st)
}

func (s *Server) listExactProcesses(w http.ResponseWriter, r *http.Request) {
	ps, err := s.opts.Engine.Exact().Processes(r.Context(), r.PathValue("id"))
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.ExactProcessList{Processes: ps})
}

// exactPID reads the {pid} path value; it has answered when ok is false.
func exactPID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	v := r.PathValue("pid")
	pid, err := strconv.ParseInt(v, 10, 64)
	if err != nil || pid < 1 || strconv.FormatInt(pid, 10) != v {
		writeError(w, wire.TypeInvalidRequest, "pid must be a positive base-10 integer")
		return 0, false
	}
	return pid, true
}

func (s *Server) exactProcess(w http.ResponseWriter, r *http.Request) {
	pid, ok := exactPID(w, r)
	if !ok {
		return
	}
	wait, err := parseWait(r, 0)
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	st, err := s.opts.Engine.Exact().Status(r.Context(), r.PathValue("id"), pid, wait)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) killExact(w http.ResponseWriter, r *http.Request) {
	pid, ok := exactPID(w, r)
	if !ok {
		return
	}
	st, err := s.opts.Engine.Exact().Kill(r.Context(), r.PathValue("id"), pid)
	if err != nil {
		s.exactError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// exactOutput streams a process's stdout or stderr (?stream=) as plain
// text: what it printed so far, then what it prints until it ends. The
// answer's body ends when the process does.
func (s *Server) exactOutput(w http.ResponseWriter, r *http.Request) {
	pid, ok := exactPID(w, r)
	if !ok {
		return
	}
	name := r.URL.Query().Get("stream")
	m := s.opts.Engine.Exact()
	// The route is checked before the answer starts: an unknown process
	// is a 404, not an empty stream.
	if _, err := m.Status(r.Context(), r.PathValue("id"), pid, 0); err != nil {
		s.exactError(w, r, err)
		return
	}
	if name != "stdout" && name != "stderr" {
		writeError(w, wire.TypeInvalidRequest, "stream must be stdout or stderr")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bound := s.opts.StreamWriteTimeout
	bw := writerFunc(func(b []byte) (int, error) {
		rc.SetWriteDeadline(time.Now().Add(bound))
		return w.Write(b)
	})
	err := m.Output(r.Context(), r.PathValue("id"), pid, name, bw, func() { rc.Flush() })
	rc.SetWriteDeadline(time.Time{})
	if err != nil && r.Context().Err() == nil {
		s.log.Warn("exact process output", "path", r.URL.Path, "err", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
