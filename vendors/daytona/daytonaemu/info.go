package daytonaemu

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// daemonVersion is the toolbox daemon version the emulator answers as.
const daemonVersion = "v0.218.0"

// notEmulated answers a typed 501 naming a feature the emulator does not
// serve (computer use, LSP, volumes, ...), in the toolbox's error body.
func notEmulated(w http.ResponseWriter, r *http.Request, feature string) {
	toolboxError(w, r, http.StatusNotImplemented, "NOT_IMPLEMENTED", "daytona emulator: "+feature+" is not emulated")
}

// apiNotEmulated is notEmulated in the control plane's error body.
func apiNotEmulated(w http.ResponseWriter, r *http.Request, feature string) {
	writeError(w, r, http.StatusNotImplemented, "daytona emulator: "+feature+" is not emulated")
}

// probeUser reads the sandbox's user, home and work directory, as the
// toolbox does when it starts.
func probeUser(ctx context.Context, box vendors.Box) (user, home, work string) {
	res, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", `id -un 2>/dev/null || id -u; echo "$HOME"; pwd`}})
	if err != nil || res.ExitCode != 0 {
		return "", "/", "/"
	}
	l := strings.SplitN(strings.TrimRight(string(res.Stdout), "\n"), "\n", 3)
	for len(l) < 3 {
		l = append(l, "/")
	}
	return l[0], l[1], l[2]
}

// codeRun is POST /process/code-run {code, language, argv, envs,
// timeout}: the code run by the language's interpreter in the image.
func (s *Server) codeRun(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Code     string            `json:"code"`
		Language string            `json:"language"`
		Argv     []string          `json:"argv"`
		Envs     map[string]string `json:"envs"`
		Timeout  int               `json:"timeout"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Code == "" {
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "invalid request body: code is required")
		return
	}
	var cmd []string
	switch req.Language {
	case "python", "":
		cmd = []string{"python3", "-c", req.Code}
	case "javascript":
		cmd = []string{"node", "-e", req.Code, "--"}
	case "typescript":
		cmd = []string{"sh", "-c", `f=$(mktemp --suffix=.ts) && printf %s "$0" >"$f" && npx --yes tsx "$f" "$@"; s=$?; rm -f "$f"; exit $s`, req.Code}
	default:
		toolboxError(w, r, http.StatusBadRequest, "BAD_REQUEST", "unsupported language: "+req.Language)
		return
	}
	ctx := r.Context()
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.Timeout)*time.Second)
		defer cancel()
	}
	res, err := sb.box.Exec(ctx, vendors.ExecSpec{Command: append(cmd, req.Argv...), Env: req.Envs, MaxOutput: 64 << 20})
	switch {
	case err != nil && r.Context().Err() == nil && ctx.Err() != nil:
		toolboxError(w, r, http.StatusRequestTimeout, "REQUEST_TIMEOUT", "code execution timeout")
	case err != nil:
		toolboxError(w, r, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": res.ExitCode, "result": string(res.Stdout) + string(res.Stderr),
			"artifacts": map[string]any{"charts": []any{}}})
	}
}

// imageUser returns the user an image's processes run as ("root" when it
// names none), or "" when the engine does not have the image.
func (s *Server) imageUser(ctx context.Context, ref string) string {
	if ref == "" {
		return ""
	}
	img, err := s.engine.ImageInspect(ctx, ref)
	if err != nil {
		return ""
	}
	if img.Config == nil || img.Config.User == "" {
		return "root"
	}
	user, _, _ := strings.Cut(img.Config.User, ":")
	return user
}
