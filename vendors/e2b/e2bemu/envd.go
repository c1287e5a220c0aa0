package e2bemu

import (
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
	"strings"

	"github.com/tangle-network/boxctl/vendors"
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
	for _, p := range []string{"Update", "StreamInput", "SendInput", "CloseStdin"} {
		m.HandleFunc("POST /process.Process/"+p, func(w http.ResponseWriter, r *http.Request) {
			writeConnectError(w, codeUnimplemented, "process.Process."+p+" is not implemented by this emulator")
		})
	}
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

// filePath resolves envd's path parameter: relative paths are under the
// user's home.
func filePath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", errors.New("path is required")
	}
	if !path.IsAbs(p) {
		user := r.URL.Query().Get("username")
		if user == "" {
			user = "user"
		}
		p = path.Join("/home", user, p)
	}
	return path.Clean(p), nil
}

func (s *Server) handleReadFile(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	p, err := filePath(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	data, err := sb.box.Read(r.Context(), p)
	if err != nil {
		s.fileError(w, r, sb, p, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// fileError answers a failed file operation as envd does.
func (s *Server) fileError(w http.ResponseWriter, r *http.Request, sb *sandbox, p string, err error) {
	switch {
	case sb.ctx.Err() != nil:
		abort()
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
		return
	case errors.Is(err, vendors.ErrNotFound):
		abort()
	}
	if res, xerr := sb.box.Exec(r.Context(), vendors.ExecSpec{Command: []string{"test", "-d", p}}); xerr == nil && res.ExitCode == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
		return
	}
	writeError(w, http.StatusInternalServerError, fmt.Sprintf("error opening file '%s': %v", p, err))
}

func (s *Server) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	p, err := filePath(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var data []byte
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, perr := mr.NextPart()
			if perr != nil {
				writeError(w, http.StatusBadRequest, "multipart body without a file part")
				return
			}
			if part.FormName() == "file" {
				data, err = io.ReadAll(part)
				break
			}
		}
	case "application/octet-stream", "":
		data, err = io.ReadAll(r.Body)
	default:
		writeError(w, http.StatusBadRequest, "unsupported content type "+mt)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "error reading the file: "+err.Error())
		return
	}
	if err := sb.box.Write(r.Context(), p, data, 0o644); err != nil {
		if sb.ctx.Err() != nil || errors.Is(err, vendors.ErrNotFound) {
			abort()
		}
		if strings.Contains(err.Error(), "Is a directory") {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
			return
		}
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("error writing file '%s': %v", p, err))
		return
	}
	writeJSON(w, http.StatusOK, []map[string]string{{"path": p, "name": path.Base(p), "type": "file"}})
}

// Connect error codes, and the HTTP status of a unary error of each.
const (
	codeInvalidArgument = "invalid_argument"
	codeNotFound        = "not_found"
	codeUnimplemented   = "unimplemented"
	codeInternal        = "internal"
	codeUnavailable     = "unavailable"
)

var codeStatus = map[string]int{codeInvalidArgument: 400, codeNotFound: 404, codeUnimplemented: 501,
	codeInternal: 500, codeUnavailable: 503}

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
