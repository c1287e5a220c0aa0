package daytonaemu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/websocket"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// sessionsDir is where sessions keep their commands' files in the box.
const sessionsDir = "/tmp/.daytona/sessions"

// The daemon marks each line of a command's log with its stream.
var (
	stdoutPrefix = []byte{0x01, 0x01, 0x01}
	stderrPrefix = []byte{0x02, 0x02, 0x02}
)

// session is a toolbox session: a long-lived shell in the box reading the
// commands appended to its stdin file. Guarded by sandbox.sessMu.
type session struct {
	id       string
	dir      string
	shell    vendors.Process
	commands map[string]*command
	order    []string
}

type command struct {
	ID           string `json:"id"`
	Command      string `json:"command"`
	ExitCode     *int   `json:"exitCode,omitempty"`
	suppressEcho bool
}

func (c *command) files(dir string) (cmdDir, log, exit, input string) {
	d := dir + "/" + c.ID
	return d, d + "/output.log", d + "/exit_code", d + "/input.pipe"
}

// sessionShell starts the session's shell in a process group of its own
// ($1 is the session's directory).
const sessionShell = `d=$1
mkdir -p "$d" && : >"$d/stdin" || exit 1
sh=sh
for s in /usr/bin/zsh /bin/zsh /usr/bin/bash /bin/bash; do [ -x "$s" ] && { sh=$s; break; }; done
tail -n +1 -s 0.1 -f "$d/stdin" | "$sh"`

// cmdWrapper is the daemon's wrapper of a session command (pkg/session
// cmdWrapperFormat): its output lines marked by stream into the log, its
// stdin a pipe, its exit code written once the log is complete.
const cmdWrapper = `
{
	log=%q
	dir=%q

	# per-command FIFOs
	sp="$dir/stdout.pipe"
	ep="$dir/stderr.pipe"
	ip=%q
	
	rm -f "$sp" "$ep" "$ip" && mkfifo "$sp" "$ep" "$ip" || exit 1

	cleanup() { rm -f "$sp" "$ep" "$ip"; }
	trap 'cleanup' EXIT HUP INT TERM

  # prefix each stream and append to shared log
	( while IFS= read -r line || [ -n "$line" ]; do printf '%s%%s\n' "$line"; done < "$sp" ) >> "$log" & r1=$!
	( while IFS= read -r line || [ -n "$line" ]; do printf '%s%%s\n' "$line"; done < "$ep" ) >> "$log" & r2=$!

	# Sync commands should see EOF immediately; async commands keep stdin open for SendInput.
	%s
	ip_pid=$!

	# Run your command from file (avoids heredoc parsing issues with pipe-fed shells)
	{ . %q; } < "$ip" > "$sp" 2> "$ep"
	_ec=$?

	# Stop the stdin holder so it doesn't outlive the command
	kill "$ip_pid" 2>/dev/null; wait "$ip_pid" 2>/dev/null

	# drain labelers (cleanup via trap)
	wait "$r1" "$r2"

	echo "$_ec" >> %q

	# Ensure unlink even if the waits failed
	cleanup
}
`

// logFollower prints the log $1 from its start as it grows, until the
// exit code file $2 exists and all of the log is out.
const logFollower = `log=$1; ec=$2; off=0
while :; do
	fin=0; [ -e "$ec" ] && fin=1
	size=$(($(wc -c <"$log" 2>/dev/null || echo 0)))
	if [ "$size" -gt "$off" ]; then tail -c +$((off+1)) "$log" | head -c $((size-off)); off=$size; fi
	[ "$fin" = 1 ] && exit 0
	sleep 0.1
done`

func octal(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\%03o", c)
	}
	return s.String()
}

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

// readTimeout bounds one read of a command's exit file.
const readTimeout = 10 * time.Second

// exitCode returns the command's exit code once its file exists.
func (s *Server) exitCode(ctx context.Context, sb *sandbox, ss *session, c *command) (*int, error) {
	sb.sessMu.Lock()
	code := c.ExitCode
	sb.sessMu.Unlock()
	if code != nil {
		return code, nil
	}
	_, _, exit, _ := c.files(ss.dir)
	// The read is an exec in the box: bound it, so that a stream that
	// never closes fails this answer instead of holding it.
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	b, err := sb.box.Read(rctx, exit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimRight(string(b), "\n"))
	if err != nil {
		return nil, fmt.Errorf("failed to convert exit code to int: %w", err)
	}
	sb.sessMu.Lock()
	c.ExitCode = &n
	sb.sessMu.Unlock()
	return &n, nil
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

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request, sb *sandbox, id string) {
	if id == "entrypoint" {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "can't execute command in entrypoint session")
		return
	}
	var req struct {
		Command           string `json:"command"`
		RunAsync          bool   `json:"runAsync"`
		Async             bool   `json:"async"`
		SuppressInputEcho bool   `json:"suppressInputEcho"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || strings.TrimSpace(req.Command) == "" {
		// The daemon aborts these with a status only.
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	async := req.RunAsync || req.Async
	ss := s.session(w, r, sb, id)
	if ss == nil {
		return
	}
	c := &command{ID: newUUID(), Command: req.Command, suppressEcho: req.SuppressInputEcho}
	cmdDir, log, exit, input := c.files(ss.dir)
	holder := `cat /dev/null > "$ip" &`
	if async {
		holder = `while :; do sleep 3600; done > "$ip" &`
	}
	wrapper := fmt.Sprintf(cmdWrapper+"\n", log, cmdDir, input, octal(stdoutPrefix), octal(stderrPrefix), holder, cmdDir+"/cmd.sh", exit)
	// The command file first (the wrapper sources it), then the wrapper
	// on the shell's stdin.
	res, err := sb.box.Exec(r.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
		`mkdir -p "$1" && : >"$1/output.log" && umask 077 && cat >"$1/cmd.sh" && printf '%s\n' "$2" >>"$3/stdin"`,
		"exec", cmdDir, wrapper, ss.dir}, Stdin: strings.NewReader(req.Command)})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("failed to write command: %s", bytes.TrimSpace(res.Stderr))
	}
	if err != nil {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	sb.sessMu.Lock()
	ss.commands[c.ID] = c
	ss.order = append(ss.order, c.ID)
	sb.sessMu.Unlock()
	if async {
		writeJSON(w, http.StatusAccepted, map[string]any{"cmdId": c.ID})
		return
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		code, err := s.exitCode(r.Context(), sb, ss, c)
		if err != nil {
			toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", err.Error())
			return
		}
		if code != nil {
			data, _ := sb.box.Read(r.Context(), log)
			out := map[string]any{"cmdId": c.ID, "exitCode": *code}
			combined, skipDemux := outputMode(r.Header)
			if combined {
				out["output"] = string(stripPrefixes(data))
			} else {
				out["output"] = string(data)
				if !skipDemux {
					o, e := demuxLog(data)
					out["stdout"], out["stderr"] = string(o), string(e)
				}
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// command returns the session's command, answering 404 when either is
// missing.
func (s *Server) command(w http.ResponseWriter, r *http.Request, sb *sandbox, sid, cid string) (*session, *command) {
	ss := s.session(w, r, sb, sid)
	if ss == nil {
		return nil, nil
	}
	sb.sessMu.Lock()
	c := ss.commands[cid]
	sb.sessMu.Unlock()
	if c == nil {
		notFound(w, r, "command")
		return nil, nil
	}
	return ss, c
}

// commandExit is command with the command's exit code (nil while it
// runs), answering 500 when it cannot be read.
func (s *Server) commandExit(w http.ResponseWriter, r *http.Request, sb *sandbox, sid, cid string) (*session, *command, *int, bool) {
	ss, c := s.command(w, r, sb, sid, cid)
	if c == nil {
		return nil, nil, nil, false
	}
	code, err := s.exitCode(r.Context(), sb, ss, c)
	if err != nil {
		toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", err.Error())
		return nil, nil, nil, false
	}
	return ss, c, code, true
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request, sb *sandbox, sid, cid string) {
	if _, c, code, ok := s.commandExit(w, r, sb, sid, cid); ok {
		writeJSON(w, http.StatusOK, command{ID: c.ID, Command: c.Command, ExitCode: code})
	}
}

// outputMode reads the SDK version a client sent as the daemon does:
// combined output (marks stripped) for SDKs before 0.27.0 and for clients
// that send no version without X-Daytona-Split-Output: true; stdout and
// stderr apart in JSON for SDKs from 0.167.0 on (skipDemux false).
func outputMode(h http.Header) (combined, skipDemux bool) {
	v := h.Get("X-Daytona-SDK-Version")
	dev := strings.Contains(v, "dev")
	combined = (v != "" && !dev && olderThan(v, 0, 27, 0)) || (v == "" && h.Get("X-Daytona-Split-Output") != "true")
	skipDemux = v == "" || (!dev && olderThan(v, 0, 167, 0))
	return combined, skipDemux
}

// olderThan reports whether version v (x.y.z, a leading v allowed) is
// before major.minor.patch; an unreadable version is not.
func olderThan(v string, major, minor, patch int) bool {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	f := strings.Split(v, ".")
	if len(f) != 3 {
		return false
	}
	var n [3]int
	for i, s := range f {
		x, err := strconv.Atoi(s)
		if err != nil {
			return false
		}
		n[i] = x
	}
	want := [3]int{major, minor, patch}
	for i := range n {
		if n[i] != want[i] {
			return n[i] < want[i]
		}
	}
	return false
}

func stripPrefixes(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, stdoutPrefix, nil), stderrPrefix, nil)
}

// demuxLog splits a marked log into stdout and stderr (the daemon's
// DemuxLogBytes).
func demuxLog(data []byte) (stdout, stderr []byte) {
	n := len(stdoutPrefix)
	next := func(from int) int {
		for i := from; i+n <= len(data); i++ {
			if bytes.Equal(data[i:i+n], stdoutPrefix) || bytes.Equal(data[i:i+n], stderrPrefix) {
				return i
			}
		}
		return len(data)
	}
	for pos := 0; pos < len(data); {
		switch {
		case pos+n <= len(data) && bytes.Equal(data[pos:pos+n], stdoutPrefix):
			end := next(pos + n)
			stdout = append(stdout, data[pos+n:end]...)
			pos = end
		case pos+n <= len(data) && bytes.Equal(data[pos:pos+n], stderrPrefix):
			end := next(pos + n)
			stderr = append(stderr, data[pos+n:end]...)
			pos = end
		default:
			pos++
		}
	}
	return stdout, stderr
}

func (s *Server) commandLogs(w http.ResponseWriter, r *http.Request, sb *sandbox, sid, cid string) {
	ss, c := s.command(w, r, sb, sid, cid)
	if c == nil {
		return
	}
	_, log, exit, _ := c.files(ss.dir)
	combined, skipDemux := outputMode(r.Header)
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		follow := r.URL.Query().Get("follow") == "true"
		websocket.Server{
			Handshake: func(*websocket.Config, *http.Request) error { return nil },
			Handler:   func(ws *websocket.Conn) { s.streamLog(ws, sb, log, exit, follow, combined) },
		}.ServeHTTP(w, r)
		return
	}
	data, err := sb.box.Read(r.Context(), log)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			notFound(w, r, "open "+log+": no such file or directory")
			return
		}
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	if !skipDemux && !combined {
		o, e := demuxLog(data)
		writeJSON(w, http.StatusOK, map[string]string{"output": string(data), "stdout": string(o), "stderr": string(e)})
		return
	}
	if combined {
		data = stripPrefixes(data)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(data)
}

// streamLog sends the log over the WebSocket as binary messages, from its
// start and, with follow, until the command ends; then closes it.
func (s *Server) streamLog(ws *websocket.Conn, sb *sandbox, log, exit string, follow, combined bool) {
	ws.PayloadType = websocket.BinaryFrame
	ctx, cancel := context.WithCancel(ws.Request().Context())
	defer cancel()
	stop := context.AfterFunc(sb.ctx, cancel)
	defer stop()
	send := func(b []byte) error {
		if combined {
			b = stripPrefixes(b)
		}
		if len(b) == 0 {
			return nil
		}
		_, err := ws.Write(b)
		return err
	}
	if !follow {
		if data, err := sb.box.Read(ctx, log); err == nil {
			_ = send(data)
		}
		return
	}
	p, err := sb.box.Spawn(ctx, vendors.SpawnSpec{Name: "dtl-" + newID(6), Command: []string{"sh", "-c", logFollower, "follow", log, exit}})
	if err != nil {
		return
	}
	defer func() {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer kcancel()
		_ = p.Signal(kctx, syscall.SIGKILL)
	}()
	stdout, stderr, err := p.Output(ctx)
	if err != nil {
		return
	}
	defer stderr.Close()
	defer stdout.Close()
	// A closed connection ends the stream.
	go func() {
		_, _ = io.Copy(io.Discard, ws)
		cancel()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := stdout.Read(buf)
		if n > 0 && send(buf[:n]) != nil {
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) sendInput(w http.ResponseWriter, r *http.Request, sb *sandbox, sid, cid string) {
	if sid == "entrypoint" {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "can't send input to entrypoint session")
		return
	}
	var req struct {
		Data string `json:"data"`
	}
	if !decodeRequired(w, r, &req, "SessionSendInputRequest.Data", func() bool { return req.Data != "" }) {
		return
	}
	ss, c, code, ok := s.commandExit(w, r, sb, sid, cid)
	if !ok {
		return
	}
	if code != nil {
		toolboxError(w, r, http.StatusGone, "GONE", fmt.Sprintf("command has already completed with exit code %d", *code))
		return
	}
	data := req.Data
	if !strings.HasSuffix(data, "\n") {
		data += "\n"
	}
	_, log, _, input := c.files(ss.dir)
	echo := ""
	if !c.suppressEcho {
		echo = "echo"
	}
	// The data goes on the exec's stdin: in no exec's configuration.
	res, err := sb.box.Exec(r.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", `[ -p "$1" ] || exit 3
if [ -n "$3" ]; then t=$(mktemp) && cat >"$t" && cat "$t" >"$1" && { printf '\001\001\001'; cat "$t"; } >>"$2"; s=$?; rm -f "$t"; exit $s; fi
exec cat >"$1"`, "input", input, log, echo}, Stdin: strings.NewReader(data)})
	switch {
	case err != nil:
		toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "failed to write to input pipe: "+err.Error())
	case res.ExitCode == 3:
		toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR",
			"failed to open input pipe: open "+input+": no such file or directory")
	case res.ExitCode != 0:
		toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "failed to write to input pipe: "+string(bytes.TrimSpace(res.Stderr)))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
