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

// gitPrelude makes a git call non-interactive; credentials travel as an
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

// gitRoute answers the toolbox's git route (its method and path) for the
// repository at the request's path.
func (s *Server) gitRoute(w http.ResponseWriter, r *http.Request, sb *sandbox, route string) {
	req, ok := decodeGitRequest(w, r)
	if !ok {
		return
	}
	p := absPath(sb, req.Path)
	// run runs a git script and answers status when it succeeds.
	run := func(status int, script string, args ...string) {
		if _, ok := s.git(w, r, sb, req, script, args...); ok {
			w.WriteHeader(status)
		}
	}
	switch route {
	case "POST /git/clone":
		s.gitClone(w, r, sb, req, p)
	case "GET /git/status":
		s.gitStatus(w, r, sb, req, p)
	case "GET /git/branches":
		s.gitBranches(w, r, sb, req, p)
	case "POST /git/branches":
		run(http.StatusCreated, `cd "$0" && git checkout -b "$1"`, p, req.Name)
	case "DELETE /git/branches":
		run(http.StatusNoContent, `cd "$0" && git branch -D "$1"`, p, req.Name)
	case "POST /git/add":
		files := req.Files
		if len(files) == 0 {
			files = []string{"."}
		}
		run(http.StatusOK, `cd "$0" && shift && git add -- "$@"`, append([]string{p, "_"}, files...)...)
	case "POST /git/commit":
		s.gitCommit(w, r, sb, req, p)
	case "POST /git/checkout":
		run(http.StatusOK, `cd "$0" && git checkout --quiet "$1"`, p, req.Branch)
	case "POST /git/pull":
		run(http.StatusOK, gitPullScript(req), p, req.Remote, req.Branch)
	case "POST /git/push":
		run(http.StatusOK, gitPushScript(req), p, req.Remote, req.Branch)
	case "POST /git/init":
		run(http.StatusOK, gitInitScript(req), p)
	default:
		notEmulated(w, r, "git "+strings.TrimPrefix(route, r.Method+" /git/"))
	}
}

// decodeGitRequest reads a git request, from the query of a GET and the
// JSON body of any other method, answering 400 when it is unreadable or
// names no path.
func decodeGitRequest(w http.ResponseWriter, r *http.Request) (gitRequest, bool) {
	var req gitRequest
	if r.Method == http.MethodGet {
		req.Path = r.URL.Query().Get("path")
	} else if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		fsError(w, r, http.StatusBadRequest, "invalid request body: "+err.Error())
		return req, false
	}
	if req.Path == "" {
		fsError(w, r, http.StatusBadRequest, "path is required")
		return req, false
	}
	return req, true
}

// gitClone clones the request's URL into p, at its branch, depth and
// commit when it names them.
func (s *Server) gitClone(w http.ResponseWriter, r *http.Request, sb *sandbox, req gitRequest, p string) {
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
}

// gitBranches answers the repository's branches and the current one.
func (s *Server) gitBranches(w http.ResponseWriter, r *http.Request, sb *sandbox, req gitRequest, p string) {
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
}

// gitCommit commits what is staged as the request's author and answers
// the new commit's hash.
func (s *Server) gitCommit(w http.ResponseWriter, r *http.Request, sb *sandbox, req gitRequest, p string) {
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
}

// gitPullScript pulls into the repository $0, from remote $1 and branch
// $2 when the request names either.
func gitPullScript(req gitRequest) string {
	script := `cd "$0" && git pull --quiet`
	if req.Remote != "" || req.Branch != "" {
		script += ` "${1:-origin}" $2`
	}
	return script
}

// gitPushScript pushes the repository $0's branch $2 (default: the
// current one) to remote $1 (default: origin).
func gitPushScript(req gitRequest) string {
	script := `cd "$0" && b=${2:-$(git rev-parse --abbrev-ref HEAD)} && git push --quiet`
	if req.SetUpstream {
		script += ` --set-upstream`
	}
	return script + ` "${1:-origin}" "$b"`
}

// gitInitScript makes the repository $0, bare or with an initial branch
// when the request asks.
func gitInitScript(req gitRequest) string {
	flags := ""
	if req.Bare {
		flags += " --bare"
	}
	if req.InitialBr != "" {
		flags += " --initial-branch " + shq(req.InitialBr)
	}
	return `mkdir -p "$0" && git init --quiet` + flags + ` "$0"`
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
