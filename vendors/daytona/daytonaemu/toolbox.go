package daytonaemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// toolboxShell runs what it reads on stdin with the shell the daemon
// would pick (zsh, bash, else sh), its stderr joined to its stdout.
const toolboxShell = `exec 2>&1
for s in /usr/bin/zsh /bin/zsh /usr/bin/bash /bin/bash; do [ -x "$s" ] && exec "$s"; done
exec sh`

// toolbox serves /toolbox/{sandboxId}/{path} as the proxy and the daemon
// do.
func (s *Server) toolbox(w http.ResponseWriter, r *http.Request) {
	id, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/toolbox/"), "/")
	if !ok || id == "" {
		toolboxError(w, r, http.StatusNotFound, "NOT_FOUND", "not found")
		return
	}
	p := "/" + rest
	s.mu.Lock()
	sb := s.sandboxes[id]
	known := sb != nil && sb.State != stateDestroyed && sb.DesiredState != stateDestroyed
	started := known && sb.State == stateStarted && sb.box != nil
	s.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey || !known:
		// The proxy asks the control plane whether the bearer may reach
		// the sandbox: not for a sandbox it does not know.
		toolboxError(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "authentication failed: Bearer token is invalid")
		return
	case !started:
		toolboxError(w, r, http.StatusBadGateway, "BAD_GATEWAY", "sandbox "+id+" is not running")
		return
	}
	if r.Header.Get("X-Daytona-Skip-Last-Activity-Update") != "true" {
		s.touch(sb)
	}
	r = r.Clone(r.Context())
	r.URL.Path = p
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(sb.ctx, cancel)
	defer stop()
	r = r.WithContext(ctx)
	route := r.Method + " " + p
	switch {
	case route == "POST /process/execute":
		s.execute(w, r, sb)
	case route == "POST /process/code-run":
		s.codeRun(w, r, sb)
	case strings.HasPrefix(p, "/process/session"):
		s.sessionRoute(w, r, sb, strings.TrimPrefix(p, "/process/session"))
	case strings.HasPrefix(p, "/files"):
		s.filesRoute(w, r, sb, route)
	case strings.HasPrefix(p, "/git/"):
		s.gitRoute(w, r, sb, route)
	case route == "GET /user-home-dir":
		writeJSON(w, http.StatusOK, map[string]string{"dir": sb.homeDir})
	case route == "GET /work-dir":
		writeJSON(w, http.StatusOK, map[string]string{"dir": sb.workDir})
	case route == "GET /version":
		writeJSON(w, http.StatusOK, map[string]string{"version": daemonVersion})
	case strings.HasPrefix(p, "/process/pty"):
		notEmulated(w, r, "pty")
	case strings.HasPrefix(p, "/process/interpreter"):
		notEmulated(w, r, "the code interpreter")
	case strings.HasPrefix(p, "/computeruse"):
		notEmulated(w, r, "computer use")
	case strings.HasPrefix(p, "/lsp"):
		notEmulated(w, r, "LSP")
	default:
		toolboxError(w, r, http.StatusNotFound, "NOT_FOUND", "no route "+route)
	}
}

// filesRoute serves the file system API.
func (s *Server) filesRoute(w http.ResponseWriter, r *http.Request, sb *sandbox, route string) {
	switch route {
	case "GET /files":
		s.listFiles(w, r, sb)
	case "DELETE /files":
		s.deleteFile(w, r, sb)
	case "GET /files/info":
		s.fileInfo(w, r, sb)
	case "POST /files/folder":
		s.createFolder(w, r, sb)
	case "POST /files/move":
		s.moveFile(w, r, sb)
	case "GET /files/find":
		s.findInFiles(w, r, sb)
	case "GET /files/search":
		s.searchFiles(w, r, sb)
	case "POST /files/replace":
		s.replaceInFiles(w, r, sb)
	case "POST /files/permissions":
		s.permissions(w, r, sb)
	case "GET /files/download":
		s.download(w, r, sb)
	case "POST /files/bulk-download":
		s.bulkDownload(w, r, sb)
	case "POST /files/upload-v2":
		s.uploadV2(w, r, sb)
	case "POST /files/bulk-upload":
		s.bulkUpload(w, r, sb)
	default:
		toolboxError(w, r, http.StatusNotFound, "NOT_FOUND", "no route "+route)
	}
}

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// execute is POST /process/execute: the command runs with the sandbox's
// shell reading it on stdin, stdout and stderr as one result.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Command string            `json:"command"`
		Timeout *uint32           `json:"timeout"`
		Cwd     *string           `json:"cwd"`
		Envs    map[string]string `json:"envs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "invalid request body: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Command) == "" {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "command cannot be empty or whitespace-only")
		return
	}
	for k := range req.Envs {
		if !envKey.MatchString(k) {
			toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", fmt.Sprintf("invalid environment variable name: '%s'", k))
			return
		}
	}
	ctx := r.Context()
	if req.Timeout != nil && *req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*req.Timeout)*time.Second)
		defer cancel()
	}
	spec := vendors.ExecSpec{Command: []string{"/bin/sh", "-c", toolboxShell}, Env: req.Envs,
		Stdin: strings.NewReader(req.Command), MaxOutput: 256 << 20}
	if req.Cwd != nil {
		spec.Dir = *req.Cwd
	}
	res, err := sb.box.Exec(ctx, spec)
	switch {
	case err != nil && r.Context().Err() == nil && ctx.Err() != nil:
		toolboxError(w, r, http.StatusRequestTimeout, "REQUEST_TIMEOUT", "command execution timeout")
	case errors.Is(err, vendors.ErrNotFound):
		s.opts.Log.Warn("daytona emulator: exec found no running container", "id", sb.ID, "err", err)
		toolboxError(w, r, http.StatusBadGateway, "BAD_GATEWAY", "sandbox "+sb.ID+" is not running")
	case err != nil:
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": -1, "result": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": res.ExitCode, "result": string(res.Stdout)})
	}
}

// download is GET /files/download. Its refusals have no body: the daemon
// aborts with a status only.
func (s *Server) download(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p := r.URL.Query().Get("path")
	if p == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	p = absPath(sb, p)
	data, err := sb.box.Read(r.Context(), p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.WriteHeader(http.StatusNotFound)
		return
	case err != nil:
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	name := path.Base(p)
	w.Header().Set("Content-Description", "File Transfer")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, name))
	w.Header().Set("Content-Transfer-Encoding", "binary")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// permissions is POST /files/permissions?path=&mode=&owner=&group=.
func (s *Server) permissions(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	q := r.URL.Query()
	p, mode := q.Get("path"), q.Get("mode")
	if p == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if mode != "" {
		if _, err := strconv.ParseUint(mode, 8, 32); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	script := `[ -e "$0" ] || exit 44
[ -z "$1" ] || chmod "$1" "$0" || exit 1
[ -z "$2$3" ] || chown "$2${3:+:$3}" "$0" || exit 1`
	res, err := sb.box.Exec(r.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", script, p, mode, q.Get("owner"), q.Get("group")}})
	switch {
	case err != nil:
		w.WriteHeader(http.StatusBadRequest)
	case res.ExitCode == 44:
		w.WriteHeader(http.StatusNotFound)
	case res.ExitCode != 0:
		w.WriteHeader(http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusOK)
	}
}
