package daytonaemu

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tangle-network/boxctl/vendors"
)

// The toolbox's git API (toolbox-api-client GitApi), run with the git of
// the sandbox's image as its user.

// gitRequest holds the fields of every git request body.
type gitRequest struct {
	Path         string   `json:"path"`
	URL          string   `json:"url"`
	Branch       string   `json:"branch"`
	CommitID     string   `json:"commit_id"`
	Depth        int      `json:"depth"`
	Username     string   `json:"username"`
	Password     string   `json:"password"`
	Files        []string `json:"files"`
	Message      string   `json:"message"`
	Author       string   `json:"author"`
	Email        string   `json:"email"`
	AllowEmpty   bool     `json:"allow_empty"`
	Name         string   `json:"name"`
	Remote       string   `json:"remote"`
	SetUpstream  bool     `json:"set_upstream"`
	InsecureSkip bool     `json:"insecure_skip_tls"`
	Bare         bool     `json:"bare"`
	InitialBr    string   `json:"initial_branch"`
}

// gitStatusCodes names porcelain status letters as FileStatus does.
var gitStatusCodes = map[byte]string{' ': "Unmodified", '?': "Untracked", 'M': "Modified", 'A': "Added",
	'D': "Deleted", 'R': "Renamed", 'C': "Copied", 'U': "Updated but unmerged", 'T': "Modified"}

// gitEnv makes a git call non-interactive; credentials travel as an
// askpass answer, never in a command line or a remote URL on disk.
const gitPrelude = `export GIT_TERMINAL_PROMPT=0
if [ -n "$GIT_USER$GIT_PASS" ]; then
	ask=$(mktemp); printf '#!/bin/sh\ncase "$1" in Username*) printf %%s "$GIT_USER";; *) printf %%s "$GIT_PASS";; esac\n' >"$ask"; chmod 700 "$ask"
	export GIT_ASKPASS=$ask; trap 'rm -f "$ask"' EXIT
fi
`

// git runs a git script for r in the sandbox and answers 400 with git's
// message when it fails; it returns the script's stdout when it succeeds.
func (s *Server) git(w http.ResponseWriter, r *http.Request, sb *sandbox, req gitRequest, script string, args ...string) ([]byte, bool) {
	env := map[string]string{}
	if req.Username != "" || req.Password != "" {
		env["GIT_USER"], env["GIT_PASS"] = req.Username, req.Password
	}
	res, err := sb.box.Exec(r.Context(), vendors.ExecSpec{Command: append([]string{"sh", "-c", gitPrelude + script}, args...),
		Env: env, MaxOutput: 16 << 20})
	switch {
	case err != nil:
		fsError(w, r, http.StatusInternalServerError, err.Error())
		return nil, false
	case res.ExitCode != 0:
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = strings.TrimSpace(string(res.Stdout))
		}
		fsError(w, r, http.StatusBadRequest, msg)
		return nil, false
	}
	return res.Stdout, true
}

func (s *Server) gitRoute(w http.ResponseWriter, r *http.Request, sb *sandbox, route string) {
	var req gitRequest
	if r.Method == http.MethodGet {
		req.Path = r.URL.Query().Get("path")
	} else if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fsError(w, r, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if req.Path == "" {
		fsError(w, r, http.StatusBadRequest, "path is required")
		return
	}
	p := absPath(sb, req.Path)
	switch route {
	case "POST /git/clone":
		if req.URL == "" {
			fsError(w, r, http.StatusBadRequest, "url is required")
			return
		}
		if _, err := url.Parse(req.URL); err != nil {
			fsError(w, r, http.StatusBadRequest, "invalid url: "+err.Error())
			return
		}
		flags := ""
		if req.Branch != "" {
			flags += " --branch " + shq(req.Branch)
		}
		if req.Depth > 0 {
			flags += " --depth " + strconv.Itoa(req.Depth)
		}
		if req.InsecureSkip {
			flags += " -c http.sslVerify=false"
		}
		script := `git clone` + flags + ` -- "$0" "$1"`
		if req.CommitID != "" {
			script += ` && cd "$1" && git checkout --quiet "$2"`
		}
		if _, ok := s.git(w, r, sb, req, script, req.URL, p, req.CommitID); ok {
			w.WriteHeader(http.StatusOK)
		}
	case "GET /git/status":
		s.gitStatus(w, r, sb, req, p)
	case "GET /git/branches":
		out, ok := s.git(w, r, sb, req, `cd "$0" && git branch --format='%(HEAD)%(refname:short)'`, p)
		if !ok {
			return
		}
		resp := map[string]any{"branches": []string{}}
		var branches []string
		for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			if name, cur := strings.CutPrefix(l, "*"); cur {
				resp["current"] = name
				branches = append(branches, name)
			} else if l = strings.TrimSpace(l); l != "" {
				branches = append(branches, l)
			}
		}
		if branches != nil {
			resp["branches"] = branches
		}
		writeJSON(w, http.StatusOK, resp)
	case "POST /git/branches":
		if _, ok := s.git(w, r, sb, req, `cd "$0" && git checkout -b "$1"`, p, req.Name); ok {
			w.WriteHeader(http.StatusCreated)
		}
	case "DELETE /git/branches":
		if _, ok := s.git(w, r, sb, req, `cd "$0" && git branch -D "$1"`, p, req.Name); ok {
			w.WriteHeader(http.StatusNoContent)
		}
	case "POST /git/add":
		files := req.Files
		if len(files) == 0 {
			files = []string{"."}
		}
		if _, ok := s.git(w, r, sb, req, `cd "$0" && shift && git add -- "$@"`, append([]string{p, "_"}, files...)...); ok {
			w.WriteHeader(http.StatusOK)
		}
	case "POST /git/commit":
		if req.Message == "" || req.Author == "" || req.Email == "" {
			fsError(w, r, http.StatusBadRequest, "message, author and email are required")
			return
		}
		empty := ""
		if req.AllowEmpty {
			empty = "--allow-empty"
		}
		out, ok := s.git(w, r, sb, req, `cd "$0" && git -c user.name="$1" -c user.email="$2" commit --quiet $4 -m "$3" && git rev-parse HEAD`,
			p, req.Author, req.Email, req.Message, empty)
		if ok {
			writeJSON(w, http.StatusOK, map[string]string{"hash": strings.TrimSpace(string(out))})
		}
	case "POST /git/checkout":
		if _, ok := s.git(w, r, sb, req, `cd "$0" && git checkout --quiet "$1"`, p, req.Branch); ok {
			w.WriteHeader(http.StatusOK)
		}
	case "POST /git/pull":
		script := `cd "$0" && git pull --quiet`
		if req.Remote != "" || req.Branch != "" {
			script += ` "${1:-origin}" $2`
		}
		if _, ok := s.git(w, r, sb, req, script, p, req.Remote, req.Branch); ok {
			w.WriteHeader(http.StatusOK)
		}
	case "POST /git/push":
		script := `cd "$0" && b=${2:-$(git rev-parse --abbrev-ref HEAD)} && git push --quiet`
		if req.SetUpstream {
			script += ` --set-upstream`
		}
		script += ` "${1:-origin}" "$b"`
		if _, ok := s.git(w, r, sb, req, script, p, req.Remote, req.Branch); ok {
			w.WriteHeader(http.StatusOK)
		}
	case "POST /git/init":
		flags := ""
		if req.Bare {
			flags += " --bare"
		}
		if req.InitialBr != "" {
			flags += " --initial-branch " + shq(req.InitialBr)
		}
		if _, ok := s.git(w, r, sb, req, `mkdir -p "$0" && git init --quiet`+flags+` "$0"`, p); ok {
			w.WriteHeader(http.StatusOK)
		}
	default:
		notEmulated(w, r, "git "+strings.TrimPrefix(route, r.Method+" /git/"))
	}
}

func (s *Server) gitStatus(w http.ResponseWriter, r *http.Request, sb *sandbox, req gitRequest, p string) {
	out, ok := s.git(w, r, sb, req, `cd "$0" && git status --porcelain=v1 --branch -z`, p)
	if !ok {
		return
	}
	st := map[string]any{"currentBranch": "", "fileStatus": []any{}, "ahead": 0, "behind": 0, "branchPublished": false}
	var files []any
	entries := strings.Split(string(out), "\x00")
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if len(e) < 3 {
			continue
		}
		if head, ok := strings.CutPrefix(e, "## "); ok {
			parseBranchHeader(head, st)
			continue
		}
		x, y, name := e[0], e[1], e[3:]
		extra := ""
		if x == 'R' || x == 'C' {
			i++
			if i < len(entries) {
				extra = entries[i]
			}
		}
		if x == '?' {
			y = '?'
		}
		files = append(files, map[string]string{"name": name, "staging": gitStatusCodes[x], "worktree": gitStatusCodes[y], "extra": extra})
	}
	if files != nil {
		st["fileStatus"] = files
	}
	writeJSON(w, http.StatusOK, st)
}

// parseBranchHeader reads porcelain's "## branch...upstream [ahead 1,
// behind 2]".
func parseBranchHeader(head string, st map[string]any) {
	head = strings.TrimPrefix(head, "No commits yet on ")
	if strings.HasPrefix(head, "HEAD (no branch)") {
		st["currentBranch"], st["detached"] = "HEAD", true
		return
	}
	branch, rest, _ := strings.Cut(head, " [")
	local, upstream, published := strings.Cut(branch, "...")
	st["currentBranch"] = local
	if published {
		st["upstream"], st["branchPublished"] = upstream, true
	}
	for f := range strings.SplitSeq(strings.TrimSuffix(rest, "]"), ", ") {
		if n, ok := strings.CutPrefix(f, "ahead "); ok {
			st["ahead"], _ = strconv.Atoi(n)
		}
		if n, ok := strings.CutPrefix(f, "behind "); ok {
			st["behind"], _ = strconv.Atoi(n)
		}
	}
}

// shq quotes s for a POSIX shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
