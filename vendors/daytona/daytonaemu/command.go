package daytonaemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// command is a command run in a session: the fields the daemon answers
// with, and whether input sent to it is echoed into its log.
type command struct {
	ID           string `json:"id"`
	Command      string `json:"command"`
	ExitCode     *int   `json:"exitCode,omitempty"`
	suppressEcho bool
}

// files returns where the command keeps its files in the box, under its
// session's directory dir.
func (c *command) files(dir string) (cmdDir, log, exit, input string) {
	d := dir + "/" + c.ID
	return d, d + "/output.log", d + "/exit_code", d + "/input.pipe"
}

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

func octal(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\%03o", c)
	}
	return s.String()
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
