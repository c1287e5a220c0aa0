package daytonaemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// sessionsDir is where sessions keep their commands' files in the box.
const sessionsDir = "/tmp/.daytona/sessions"

// session is a toolbox session: a long-lived shell in the box reading the
// commands appended to its stdin file. Guarded by sandbox.sessMu.
type session struct {
	id       string
	dir      string
	shell    vendors.Process
	commands map[string]*command
	order    []string
}

// sessionShell starts the session's shell in a process group of its own
// ($1 is the session's directory).
const sessionShell = `d=$1
mkdir -p "$d" && : >"$d/stdin" || exit 1
sh=sh
for s in /usr/bin/zsh /bin/zsh /usr/bin/bash /bin/bash; do [ -x "$s" ] && { sh=$s; break; }; done
tail -n +1 -s 0.1 -f "$d/stdin" | "$sh"`

func (s *Server) sessionRoute(w http.ResponseWriter, r *http.Request, sb *sandbox, p string) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case p == "" && r.Method == http.MethodPost:
		s.createSession(w, r, sb)
	case p == "" && r.Method == http.MethodGet:
		s.listSessions(w, r, sb)
	case len(parts) == 1 && r.Method == http.MethodGet:
		s.getSession(w, r, sb, parts[0])
	case len(parts) == 1 && r.Method == http.MethodDelete:
		s.deleteSession(w, r, sb, parts[0])
	case len(parts) == 2 && parts[1] == "exec" && r.Method == http.MethodPost:
		s.sessionExec(w, r, sb, parts[0])
	case len(parts) == 3 && parts[1] == "command" && r.Method == http.MethodGet:
		s.getCommand(w, r, sb, parts[0], parts[2])
	case len(parts) == 4 && parts[1] == "command" && parts[3] == "logs" && r.Method == http.MethodGet:
		s.commandLogs(w, r, sb, parts[0], parts[2])
	case len(parts) == 4 && parts[1] == "command" && parts[3] == "input" && r.Method == http.MethodPost:
		s.sendInput(w, r, sb, parts[0], parts[2])
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// decodeRequired decodes the JSON body into v and checks its required
// field (named as the daemon's validator names it, Type.Field) with
// present, answering 400 as the daemon does when either fails.
func decodeRequired(w http.ResponseWriter, r *http.Request, v any, field string, present func() bool) bool {
	msg := ""
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		msg = err.Error()
	} else if !present() {
		_, name, _ := strings.Cut(field, ".")
		msg = "Key: '" + field + "' Error:Field validation for '" + name + "' failed on the 'required' tag"
	}
	if msg != "" {
		toolboxError(w, r, http.StatusBadRequest, "INVALID_REQUEST_BODY", msg)
		return false
	}
	return true
}

func notFound(w http.ResponseWriter, r *http.Request, what string) {
	toolboxError(w, r, http.StatusNotFound, "NOT_FOUND", "not found: "+what+" not found")
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if !decodeRequired(w, r, &req, "CreateSessionRequest.SessionId", func() bool { return req.SessionID != "" }) {
		return
	}
	if req.SessionID == "entrypoint" {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "provided session ID is reserved and cannot be created/overridden")
		return
	}
	sb.sessMu.Lock()
	defer sb.sessMu.Unlock()
	if sb.sessions[req.SessionID] != nil {
		toolboxError(w, r, http.StatusConflict, "CONFLICT", "session already exists")
		return
	}
	sum := sha256.Sum256([]byte(req.SessionID))
	h := hex.EncodeToString(sum[:8])
	dir := sessionsDir + "/" + h
	shell, err := sb.box.Spawn(r.Context(), vendors.SpawnSpec{Name: "dts-" + h + "-" + newID(3),
		Command: []string{"setsid", "sh", "-c", sessionShell, "session", dir}})
	if err != nil {
		toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", err.Error())
		return
	}
	sb.sessions[req.SessionID] = &session{id: req.SessionID, dir: dir, shell: shell, commands: map[string]*command{}}
	w.WriteHeader(http.StatusCreated)
}

// session returns the named session, answering 404 when there is none.
func (s *Server) session(w http.ResponseWriter, r *http.Request, sb *sandbox, id string) *session {
	sb.sessMu.Lock()
	defer sb.sessMu.Unlock()
	ss := sb.sessions[id]
	if ss == nil {
		notFound(w, r, "session")
	}
	return ss
}

func (s *Server) sessionDTO(ctx context.Context, sb *sandbox, ss *session) (map[string]any, error) {
	sb.sessMu.Lock()
	cmds := make([]*command, 0, len(ss.order))
	for _, id := range ss.order {
		cmds = append(cmds, ss.commands[id])
	}
	sb.sessMu.Unlock()
	out := make([]command, 0, len(cmds))
	for _, c := range cmds {
		code, err := s.exitCode(ctx, sb, ss, c)
		if err != nil {
			return nil, err
		}
		out = append(out, command{ID: c.ID, Command: c.Command, ExitCode: code})
	}
	return map[string]any{"sessionId": ss.id, "commands": out}, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, sb *sandbox, id string) {
	ss := s.session(w, r, sb, id)
	if ss == nil {
		return
	}
	d, err := s.sessionDTO(r.Context(), sb, ss)
	if err != nil {
		toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	sb.sessMu.Lock()
	var all []*session
	for _, ss := range sb.sessions {
		all = append(all, ss)
	}
	sb.sessMu.Unlock()
	out := []map[string]any{}
	for _, ss := range all {
		d, err := s.sessionDTO(r.Context(), sb, ss)
		if err != nil {
			toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", err.Error())
			return
		}
		out = append(out, d)
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSession ends the session's shell and everything it started (its
// process group, and descendants that left it), and forgets it.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox, id string) {
	if id == "entrypoint" {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "can't delete entrypoint session")
		return
	}
	sb.sessMu.Lock()
	ss := sb.sessions[id]
	delete(sb.sessions, id)
	sb.sessMu.Unlock()
	if ss == nil {
		notFound(w, r, "session")
		return
	}
	pid := 0
	if p, ok := ss.shell.(*docker.Process); ok {
		pid = p.PID()
	}
	script := `kt() { for c in $(cat /proc/$1/task/*/children 2>/dev/null); do kt "$c" "$2"; done; kill -"$2" "$1" 2>/dev/null; }
p=$1
kill -TERM -- "-$p" 2>/dev/null; kt "$p" TERM
i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done
kill -KILL -- "-$p" 2>/dev/null; kt "$p" KILL
rm -rf "$2"; exit 0`
	if pid > 0 {
		_, _ = sb.box.Exec(r.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", script, "kill", strconv.Itoa(pid), ss.dir}})
	}
	w.WriteHeader(http.StatusNoContent)
}
