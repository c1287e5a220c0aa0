package e2bemu

import (
	"compress/gzip"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// envd's HTTP API (spec/envd/envd.yaml) and its Connect process service.

type sandboxKey struct{}

func sandboxOf(r *http.Request) *sandbox { return r.Context().Value(sandboxKey{}).(*sandbox) }

func (s *Server) routeEnvd() {
	m := s.envd
	m.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	m.HandleFunc("GET /files", s.handleReadFile)
	m.HandleFunc("POST /files", s.handleWriteFile)
	m.HandleFunc("POST /process.Process/Start", s.handleStart)
	m.HandleFunc("POST /process.Process/Connect", s.handleProcConnect)
	m.HandleFunc("POST /process.Process/List", s.handleProcList)
	m.HandleFunc("POST /process.Process/SendSignal", s.handleSignal)
	m.HandleFunc("POST /process.Process/SendInput", s.handleSendInput)
	m.HandleFunc("POST /process.Process/CloseStdin", s.handleCloseStdin)
	m.HandleFunc("POST /process.Process/Update", s.handleUpdate)
	// Client streaming: the official SDK sends input with SendInput.
	m.HandleFunc("POST /process.Process/StreamInput", func(w http.ResponseWriter, r *http.Request) {
		writeConnectError(w, codeUnimplemented, "process.Process/StreamInput is not emulated (use SendInput)")
	})
	s.routeFilesystem()
}

// proxyError is the JSON body of the sandbox proxy's own errors.
type proxyError struct {
	SandboxID string `json:"sandboxId"`
	Message   string `json:"message"`
	Port      int    `json:"port,omitempty"`
	Code      int    `json:"code"`
}

// serveSandbox serves a request for port of sandbox id: envd's port, or
// any other through the proxy. Every request ends when the sandbox does.
func (s *Server) serveSandbox(w http.ResponseWriter, r *http.Request, id string, port int) {
	sb, ok := s.lookup(id)
	if !ok {
		writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: id, Message: "The sandbox was not found", Code: http.StatusBadGateway})
		return
	}
	s.mu.Lock()
	paused := sb.paused
	s.mu.Unlock()
	if paused {
		writeJSON(w, http.StatusBadGateway, proxyError{SandboxID: id, Message: "The sandbox is paused", Code: http.StatusBadGateway})
		return
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), sandboxKey{}, sb))
	defer cancel()
	stop := context.AfterFunc(sb.ctx, cancel)
	defer stop()
	r = r.WithContext(ctx)
	if port != EnvdPort {
		s.proxy(w, r, sb, port)
		return
	}
	if sb.envdToken != "" && r.URL.Path != "/health" &&
		subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Access-Token")), []byte(sb.envdToken)) != 1 {
		writeError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
		return
	}
	s.envd.ServeHTTP(w, r)
}

// requestUser is the OS user a request is for: the user of its
// Authorization (Basic, "<user>:"), else the username parameter, else the
// image's user.
func requestUser(r *http.Request, sb *sandbox) string {
	if u, _, ok := r.BasicAuth(); ok && u != "" {
		return u
	}
	if u := r.URL.Query().Get("username"); u != "" {
		return u
	}
	return sb.user
}

// resolvePath makes p absolute: a relative path is under the user's home.
func (s *Server) resolvePath(r *http.Request, sb *sandbox, user, p string) (string, error) {
	if p == "" {
		return "", errors.New("path is required")
	}
	if !path.IsAbs(p) {
		home, err := s.userHome(r.Context(), sb, user)
		if err != nil {
			return "", err
		}
		p = path.Join(home, p)
	}
	return path.Clean(p), nil
}

// readScript prints the file $0, failing as envd does: 2 missing, 3 a
// directory, 4 not readable.
const readScript = `[ -e "$0" ] || exit 2; [ -d "$0" ] && exit 3; [ -r "$0" ] || exit 4; exec cat -- "$0"`

// writeScript writes its stdin to the file $0, making its parents.
const writeScript = `[ -d "$0" ] && exit 3; mkdir -p -- "$(dirname -- "$0")" && cat >"$0"`

func (s *Server) handleReadFile(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	user := requestUser(r, sb)
	p, err := s.resolvePath(r, sb, user, r.URL.Query().Get("path"))
	if err != nil {
		s.fileError(w, sb, p, err)
		return
	}
	res, err := s.runAs(r.Context(), sb, user, nil, "sh", "-c", readScript, p)
	if err == nil && res.code != 0 {
		err = fileStatus(res)
	}
	if err != nil {
		s.fileError(w, sb, p, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	w.Header().Set("Content-Length", strconv.Itoa(len(res.stdout)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.stdout)
}

// File errors of the scripts, by exit status.
var (
	errIsDir     = errors.New("is a directory")
	errNotDir    = errors.New("not a directory")
	errForbidden = errors.New("permission denied")
	errExists    = errors.New("already exists")
)

// fileStatus maps a file script's exit status to its error.
func fileStatus(res runResult) error {
	switch res.code {
	case 2:
		return fs.ErrNotExist
	case 3:
		return errIsDir
	case 4:
		return errForbidden
	case 5:
		return errNotDir
	case 17:
		return errExists
	}
	return fmt.Errorf("exit status %d: %s", res.code, strings.TrimSpace(string(res.stderr)))
}

// fileError answers a failed file operation as envd does.
func (s *Server) fileError(w http.ResponseWriter, sb *sandbox, p string, err error) {
	switch {
	case sb.ctx.Err() != nil:
		abort()
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
	case errors.Is(err, errIsDir):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
	case errors.Is(err, errForbidden), strings.Contains(err.Error(), "Permission denied"):
		writeError(w, http.StatusForbidden, fmt.Sprintf("permission denied for path '%s'", p))
	case errors.Is(err, errNoUser), err.Error() == "path is required":
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("error on file '%s': %v", p, err))
	}
}

func (s *Server) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	user := requestUser(r, sb)
	type upload struct {
		path string
		data []byte
	}
	var files []upload
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, perr := mr.NextPart()
			if errors.Is(perr, io.EOF) {
				break
			}
			if perr != nil {
				writeError(w, http.StatusBadRequest, "error reading the multipart body: "+perr.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			data, err := io.ReadAll(part)
			if err != nil {
				writeError(w, http.StatusBadRequest, "error reading the file: "+err.Error())
				return
			}
			p := r.URL.Query().Get("path")
			if p == "" {
				// The whole path: Part.FileName keeps only its base.
				_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				p = cd["filename"]
			}
			files = append(files, upload{p, data})
		}
		if len(files) == 0 {
			writeError(w, http.StatusBadRequest, "multipart body without a file part")
			return
		}
	case "application/octet-stream", "":
		var body io.Reader = r.Body
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				writeError(w, http.StatusBadRequest, "error reading the gzip body: "+err.Error())
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "error reading the file: "+err.Error())
			return
		}
		files = append(files, upload{r.URL.Query().Get("path"), data})
	default:
		writeError(w, http.StatusBadRequest, "unsupported content type "+mt)
		return
	}
	out := []map[string]string{}
	for _, f := range files {
		p, err := s.resolvePath(r, sb, user, f.path)
		if err != nil {
			s.fileError(w, sb, f.path, err)
			return
		}
		res, err := s.runAs(r.Context(), sb, user, f.data, "sh", "-c", writeScript, p)
		if err == nil && res.code != 0 {
			err = fileStatus(res)
		}
		if err != nil {
			s.fileError(w, sb, p, err)
			return
		}
		out = append(out, map[string]string{"path": p, "name": path.Base(p), "type": "file"})
	}
	writeJSON(w, http.StatusOK, out)
}

// Connect error codes, and the HTTP status of a unary error of each.
const (
	codeInvalidArgument = "invalid_argument"
	codeNotFound        = "not_found"
	codeUnimplemented   = "unimplemented"
	codeInternal        = "internal"
	codeUnavailable     = "unavailable"
	// codeFailedPrecondition and codeAlreadyExists are as envd answers them.
	codeFailedPrecondition = "failed_precondition"
	codeAlreadyExists      = "already_exists"
	codePermissionDenied   = "permission_denied"
)

var codeStatus = map[string]int{codeInvalidArgument: 400, codeNotFound: 404, codeUnimplemented: 501,
	codeInternal: 500, codeUnavailable: 503,
	codeFailedPrecondition: 400, codeAlreadyExists: 409, codePermissionDenied: 403}

// writeConnectError answers a unary Connect call with an error.
func writeConnectError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(codeStatus[code])
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

// unaryRequest decodes a unary Connect request, answering the error
// itself when it fails.
func unaryRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		w.Header().Set("Accept-Post", "application/json, application/proto")
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return false
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		writeConnectError(w, codeInvalidArgument, "unmarshal into "+fmt.Sprintf("%T", v)+": "+err.Error())
		return false
	}
	return true
}
