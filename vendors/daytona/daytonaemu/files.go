package daytonaemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/vendors"
)

// The toolbox's file system API (toolbox-api-client FileSystemApi): every
// route runs in the sandbox's container as its user.

// maxUpload caps one uploaded file.
const maxUpload = 512 << 20

// run runs a shell script in the sandbox with args as $0, $1, ...
func run(ctx context.Context, sb *sandbox, script string, args ...string) (vendors.ExecResult, error) {
	return sb.box.Exec(ctx, vendors.ExecSpec{Command: append([]string{"sh", "-c", script}, args...), MaxOutput: 64 << 20})
}

// fileInfo is FileInfo.
type fileInfo struct {
	Name        string `json:"name"`
	Path        string `json:"path,omitempty"`
	IsDir       bool   `json:"isDir"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	Permissions string `json:"permissions"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	ModTime     string `json:"modTime"`
	ModifiedAt  string `json:"modifiedAt"`
}

// statFormat is GNU find's -printf of one fileInfo line.
const statFormat = `%p\t%f\t%y\t%s\t%M\t%m\t%u\t%g\t%T@\n`

// parseStat reads statFormat lines.
func parseStat(out []byte) []fileInfo {
	var l []fileInfo
	for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 9 {
			continue
		}
		size, _ := strconv.ParseInt(f[3], 10, 64)
		perm, _ := strconv.ParseUint(f[5], 8, 32)
		secs, _ := strconv.ParseFloat(f[8], 64)
		mt := time.Unix(0, int64(secs*1e9)).UTC().Format(time.RFC3339Nano)
		l = append(l, fileInfo{Path: f[0], Name: f[1], IsDir: f[2] == "d", Size: size, Mode: f[4],
			Permissions: fmt.Sprintf("%04o", perm), Owner: f[6], Group: f[7], ModTime: mt, ModifiedAt: mt})
	}
	return l
}

// absPath resolves a path the toolbox takes: relative ones from the work
// directory.
func absPath(sb *sandbox, p string) string {
	if !path.IsAbs(p) {
		p = sb.workDir + "/" + p
	}
	return path.Clean(p)
}

// fsError answers a failed file call as the daemon does.
func fsError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	code := "BAD_REQUEST"
	switch status {
	case http.StatusNotFound:
		code = "NOT_FOUND"
	case http.StatusInternalServerError:
		code = "INTERNAL_SERVER_ERROR"
	}
	toolboxError(w, r, status, code, msg)
}

// pathArg returns the query parameter name, or answers 400.
func pathArg(w http.ResponseWriter, r *http.Request, sb *sandbox, name string) (string, bool) {
	p := r.URL.Query().Get(name)
	if p == "" {
		fsError(w, r, http.StatusBadRequest, name+" is required")
		return "", false
	}
	return absPath(sb, p), true
}

// scriptStatus maps a script's exit: 44 missing, 0 fine, else 400 with
// its output.
func scriptStatus(w http.ResponseWriter, r *http.Request, res vendors.ExecResult, err error, p string) bool {
	switch {
	case err != nil:
		fsError(w, r, http.StatusInternalServerError, err.Error())
	case res.ExitCode == 44:
		fsError(w, r, http.StatusNotFound, "file not found: "+p)
	case res.ExitCode != 0:
		fsError(w, r, http.StatusBadRequest, strings.TrimSpace(string(res.Stderr)+string(res.Stdout)))
	default:
		return true
	}
	return false
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := pathArg(w, r, sb, "path")
	if !ok {
		return
	}
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 {
			fsError(w, r, http.StatusBadRequest, "depth must be a positive integer")
			return
		}
		depth = n
	}
	res, err := run(r.Context(), sb, `[ -e "$0" ] || exit 44; [ -d "$0" ] || { echo "not a directory: $0" >&2; exit 1; }
find "$0" -mindepth 1 -maxdepth "$1" -printf "$2" 2>/dev/null; exit 0`, p, strconv.Itoa(depth), statFormat)
	if !scriptStatus(w, r, res, err, p) {
		return
	}
	l := parseStat(res.Stdout)
	if l == nil {
		l = []fileInfo{}
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) fileInfo(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := pathArg(w, r, sb, "path")
	if !ok {
		return
	}
	res, err := run(r.Context(), sb, `[ -e "$0" ] || exit 44; find "$0" -maxdepth 0 -printf "$1"`, p, statFormat)
	if !scriptStatus(w, r, res, err, p) {
		return
	}
	l := parseStat(res.Stdout)
	if len(l) != 1 {
		fsError(w, r, http.StatusInternalServerError, "stat "+p)
		return
	}
	writeJSON(w, http.StatusOK, l[0])
}

func (s *Server) createFolder(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := pathArg(w, r, sb, "path")
	if !ok {
		return
	}
	mode := r.URL.Query().Get("mode")
	if mode == "" {
		mode = "0755"
	}
	if _, err := strconv.ParseUint(mode, 8, 32); err != nil {
		fsError(w, r, http.StatusBadRequest, "invalid mode "+mode)
		return
	}
	res, err := run(r.Context(), sb, `mkdir -p -m "$1" "$0"`, p, mode)
	if scriptStatus(w, r, res, err, p) {
		w.WriteHeader(http.StatusCreated)
	}
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := pathArg(w, r, sb, "path")
	if !ok {
		return
	}
	res, err := run(r.Context(), sb, `[ -e "$0" ] || [ -L "$0" ] || exit 44
if [ -d "$0" ] && [ ! -L "$0" ]; then
	[ "$1" = true ] || { echo "cannot delete directory without recursive flag" >&2; exit 1; }
	rm -rf -- "$0"
else
	rm -f -- "$0"
fi`, p, r.URL.Query().Get("recursive"))
	if scriptStatus(w, r, res, err, p) {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) moveFile(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	src, ok := pathArg(w, r, sb, "source")
	if !ok {
		return
	}
	dst, ok := pathArg(w, r, sb, "destination")
	if !ok {
		return
	}
	res, err := run(r.Context(), sb, `[ -e "$0" ] || exit 44; mkdir -p "$(dirname "$1")" && mv -f -- "$0" "$1"`, src, dst)
	if scriptStatus(w, r, res, err, src) {
		w.WriteHeader(http.StatusOK)
	}
}

// match is Match.
type match struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// findInFiles is GET /files/find: lines holding pattern (a fixed string)
// under path.
func (s *Server) findInFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := pathArg(w, r, sb, "path")
	if !ok {
		return
	}
	pattern := r.URL.Query().Get("pattern")
	if pattern == "" {
		fsError(w, r, http.StatusBadRequest, "pattern is required")
		return
	}
	res, err := run(r.Context(), sb, `[ -e "$0" ] || exit 44; grep -rnIF -- "$1" "$0"; [ $? -le 1 ]`, p, pattern)
	if !scriptStatus(w, r, res, err, p) {
		return
	}
	out := []match{}
	for line := range strings.SplitSeq(strings.TrimRight(string(res.Stdout), "\n"), "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		num, content, ok := strings.Cut(rest, ":")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		if !strings.HasPrefix(p, "/") || !strings.HasPrefix(file, "/") {
			file = path.Join(p, file)
		}
		out = append(out, match{File: file, Line: n, Content: content})
	}
	writeJSON(w, http.StatusOK, out)
}

// searchFiles is GET /files/search: the paths under path whose names
// match the glob pattern.
func (s *Server) searchFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := pathArg(w, r, sb, "path")
	if !ok {
		return
	}
	pattern := r.URL.Query().Get("pattern")
	if pattern == "" {
		fsError(w, r, http.StatusBadRequest, "pattern is required")
		return
	}
	res, err := run(r.Context(), sb, `[ -e "$0" ] || exit 44; find "$0" -mindepth 1 -name "$1" 2>/dev/null; exit 0`, p, pattern)
	if !scriptStatus(w, r, res, err, p) {
		return
	}
	files := []string{}
	for f := range strings.SplitSeq(strings.TrimRight(string(res.Stdout), "\n"), "\n") {
		if f != "" {
			files = append(files, f)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": files})
}

// replaceResult is ReplaceResult.
type replaceResult struct {
	File    string `json:"file"`
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
}

// replaceInFiles is POST /files/replace: every match of pattern (a
// regular expression) in each file replaced by newValue.
func (s *Server) replaceInFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Files    []string `json:"files"`
		Pattern  string   `json:"pattern"`
		NewValue *string  `json:"newValue"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Pattern == "" || req.NewValue == nil {
		fsError(w, r, http.StatusBadRequest, "invalid request body: files, pattern and newValue are required")
		return
	}
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		fsError(w, r, http.StatusBadRequest, "invalid pattern: "+err.Error())
		return
	}
	out := make([]replaceResult, 0, len(req.Files))
	for _, f := range req.Files {
		p := absPath(sb, f)
		res := replaceResult{File: f, Success: true}
		if err := replaceIn(r.Context(), sb, p, re, *req.NewValue); err != nil {
			res.Success, res.Error = false, err.Error()
		}
		out = append(out, res)
	}
	writeJSON(w, http.StatusOK, out)
}

func replaceIn(ctx context.Context, sb *sandbox, p string, re *regexp.Regexp, repl string) error {
	data, err := sb.box.Read(ctx, p)
	if err != nil {
		return err
	}
	res, err := run(ctx, sb, `stat -c %a "$0"`, p)
	if err != nil || res.ExitCode != 0 {
		return fmt.Errorf("stat %s: %v%s", p, err, res.Stderr)
	}
	mode, _ := strconv.ParseUint(strings.TrimSpace(string(res.Stdout)), 8, 32)
	return sb.box.Write(ctx, p, re.ReplaceAll(data, []byte(repl)), uint32(mode))
}

// uploadV2 is POST /files/upload-v2?path=: the file as multipart field
// "file" or as the raw body; parents made, a file there replaced.
func (s *Server) uploadV2(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := pathArg(w, r, sb, "path")
	if !ok {
		return
	}
	var src io.Reader = r.Body
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		f, _, err := r.FormFile("file")
		if err != nil {
			fsError(w, r, http.StatusBadRequest, "file is required: "+err.Error())
			return
		}
		defer f.Close()
		src = f
	}
	data, err := io.ReadAll(io.LimitReader(src, maxUpload+1))
	if err != nil || len(data) > maxUpload {
		fsError(w, r, http.StatusBadRequest, fmt.Sprintf("read upload: over %d bytes or cut short", maxUpload))
		return
	}
	if err := writeFile(r.Context(), sb, p, data); err != nil {
		fsError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": path.Base(p), "path": p, "type": "file"})
}

// writeFile writes data at p, keeping the mode of a file there.
func writeFile(ctx context.Context, sb *sandbox, p string, data []byte) error {
	mode := uint32(0o644)
	if res, err := run(ctx, sb, `stat -c %a "$0" 2>/dev/null`, p); err == nil && res.ExitCode == 0 {
		if m, err := strconv.ParseUint(strings.TrimSpace(string(res.Stdout)), 8, 32); err == nil {
			mode = uint32(m)
		}
	}
	return sb.box.Write(ctx, p, data, mode)
}

var bulkField = regexp.MustCompile(`^files\[(\d+)\]\.(path|file)$`)

// bulkUpload is POST /files/bulk-upload: multipart fields files[i].path
// and files[i].file.
func (s *Server) bulkUpload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	mr, err := r.MultipartReader()
	if err != nil {
		fsError(w, r, http.StatusBadRequest, "want multipart/form-data: "+err.Error())
		return
	}
	paths, datas := map[string]string{}, map[string][]byte{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fsError(w, r, http.StatusBadRequest, "read multipart: "+err.Error())
			return
		}
		m := bulkField.FindStringSubmatch(part.FormName())
		if m == nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(part, maxUpload+1))
		if err != nil || len(b) > maxUpload {
			fsError(w, r, http.StatusBadRequest, "read "+part.FormName())
			return
		}
		if m[2] == "path" {
			paths[m[1]] = string(b)
		} else {
			datas[m[1]] = b
		}
	}
	for i, p := range paths {
		data, ok := datas[i]
		if !ok {
			fsError(w, r, http.StatusBadRequest, "files["+i+"].file is missing")
			return
		}
		if err := writeFile(r.Context(), sb, absPath(sb, p), data); err != nil {
			fsError(w, r, http.StatusBadRequest, err.Error())
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// bulkDownload is POST /files/bulk-download {paths}: a multipart answer,
// a part "file" per file (its file name the path asked for), or a part
// "error" with the daemon's error body.
func (s *Server) bulkDownload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Paths) == 0 {
		fsError(w, r, http.StatusBadRequest, "paths are required")
		return
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range req.Paths {
		data, err := sb.box.Read(r.Context(), absPath(sb, p))
		field, ctype := "file", "application/octet-stream"
		if err != nil {
			st, code := http.StatusBadRequest, "BAD_REQUEST"
			if errors.Is(err, fs.ErrNotExist) {
				st, code = http.StatusNotFound, "NOT_FOUND"
			}
			data, _ = json.Marshal(map[string]any{"message": err.Error(), "statusCode": st, "code": code})
			field, ctype = "error", "application/json"
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, p))
		h.Set("Content-Type", ctype)
		h.Set("Content-Length", strconv.Itoa(len(data)))
		pw, err := mw.CreatePart(h)
		if err != nil {
			fsError(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		_, _ = pw.Write(data)
	}
	_ = mw.Close()
	w.Header().Set("Content-Type", mw.FormDataContentType())
	w.Header().Set("Content-Length", strconv.Itoa(body.Len()))
	_, _ = w.Write(body.Bytes())
}
