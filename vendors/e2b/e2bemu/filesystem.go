package e2bemu

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// envd's filesystem service (filesystem.proto), run in the sandbox's
// container as the request's user with the shell tools of the image
// (find, mkdir, mv, rm), so permissions are the container's own.

func (s *Server) routeFilesystem() {
	m := s.envd
	m.HandleFunc("POST /filesystem.Filesystem/Stat", s.fsUnary(`[ -e "$0" ] || [ -L "$0" ] || exit 2
find "$0" -maxdepth 0 -printf "$1"`, "entry"))
	m.HandleFunc("POST /filesystem.Filesystem/MakeDir", s.fsUnary(`[ -e "$0" ] && exit 17
mkdir -p -- "$0" && find "$0" -maxdepth 0 -printf "$1"`, "entry"))
	m.HandleFunc("POST /filesystem.Filesystem/Remove", s.fsUnary(`[ -e "$0" ] || [ -L "$0" ] || exit 2
rm -rf -- "$0"`, ""))
	m.HandleFunc("POST /filesystem.Filesystem/ListDir", s.fsUnary(`[ -e "$0" ] || exit 2; [ -d "$0" ] || exit 5
find "$0" -mindepth 1 -maxdepth "$2" -printf "$1"`, "entries"))
	m.HandleFunc("POST /filesystem.Filesystem/Move", s.fsUnary(`[ -e "$0" ] || [ -L "$0" ] || exit 2
mkdir -p -- "$(dirname -- "$2")" && mv -T -- "$0" "$2" && find "$2" -maxdepth 0 -printf "$1"`, "entry"))
	m.HandleFunc("POST /filesystem.Filesystem/WatchDir", s.handleWatchDir)
	m.HandleFunc("POST /filesystem.Filesystem/CreateWatcher", s.handleCreateWatcher)
	m.HandleFunc("POST /filesystem.Filesystem/GetWatcherEvents", s.handleGetWatcherEvents)
	m.HandleFunc("POST /filesystem.Filesystem/RemoveWatcher", s.handleRemoveWatcher)
}

// entryFormat is find's -printf format of one entry: path, type, size,
// permission bits, owner, group, mtime and link target.
const entryFormat = `%p\t%y\t%s\t%m\t%u\t%g\t%T@\t%l\n`

// fsRequest is every field of the filesystem requests that take paths.
type fsRequest struct {
	Path        string `json:"path"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Depth       uint32 `json:"depth"`
	Recursive   bool   `json:"recursive"`
	WatcherID   string `json:"watcherId"`
}

// fsUnary serves a unary filesystem call with a script run as the user:
// $0 the path (Move: the source), $1 entryFormat, $2 the depth (Move: the
// destination). Its printed entries answer under key ("" answers {}).
func (s *Server) fsUnary(script, key string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sb := sandboxOf(r)
		var req fsRequest
		if !unaryRequest(w, r, &req) {
			return
		}
		user := requestUser(r, sb)
		p := req.Path
		if req.Source != "" {
			p = req.Source
		}
		p, err := s.resolvePath(r, sb, user, p)
		if err != nil {
			s.fsError(w, sb, err)
			return
		}
		arg2 := strconv.Itoa(int(max(req.Depth, 1)))
		if req.Destination != "" {
			if arg2, err = s.resolvePath(r, sb, user, req.Destination); err != nil {
				s.fsError(w, sb, err)
				return
			}
		}
		res, err := s.runAs(r.Context(), sb, user, nil, "sh", "-c", script, p, entryFormat, arg2)
		if err == nil && res.code != 0 {
			err = fileStatus(res)
		}
		if err != nil {
			s.fsError(w, sb, &pathError{p, err})
			return
		}
		entries := parseEntries(string(res.stdout))
		switch {
		case key == "":
			writeJSON(w, http.StatusOK, map[string]any{})
		case key == "entries":
			writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
		case len(entries) == 1:
			writeJSON(w, http.StatusOK, map[string]any{"entry": entries[0]})
		default:
			writeConnectError(w, codeInternal, "no entry for "+p)
		}
	}
}

// pathError names the path an operation failed on.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// fsError answers a failed filesystem call with envd's Connect code.
func (s *Server) fsError(w http.ResponseWriter, sb *sandbox, err error) {
	switch {
	case sb.ctx.Err() != nil:
		abort()
	case errors.Is(err, fs.ErrNotExist):
		writeConnectError(w, codeNotFound, "file not found: "+err.Error())
	case errors.Is(err, errExists):
		writeConnectError(w, codeAlreadyExists, "directory already exists: "+err.Error())
	case errors.Is(err, errNotDir):
		writeConnectError(w, codeInvalidArgument, "path is not a directory: "+err.Error())
	case errors.Is(err, errForbidden), strings.Contains(err.Error(), "Permission denied"):
		writeConnectError(w, codePermissionDenied, "permission denied: "+err.Error())
	case errors.Is(err, errNoUser), err.Error() == "path is required":
		writeConnectError(w, codeInvalidArgument, err.Error())
	default:
		writeConnectError(w, codeInternal, err.Error())
	}
}

// parseEntries reads entryFormat lines into EntryInfo, as protojson
// writes it.
func parseEntries(out string) []map[string]any {
	entries := []map[string]any{}
	for line := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 8 {
			continue
		}
		perm, _ := strconv.ParseUint(f[3], 8, 32)
		mode := os.FileMode(perm & 0o777)
		for bit, m := range map[uint64]os.FileMode{0o4000: os.ModeSetuid, 0o2000: os.ModeSetgid, 0o1000: os.ModeSticky} {
			if perm&bit != 0 {
				mode |= m
			}
		}
		typ := "FILE_TYPE_FILE"
		switch f[1] {
		case "d":
			typ, mode = "FILE_TYPE_DIRECTORY", mode|os.ModeDir
		case "l":
			typ, mode = "FILE_TYPE_SYMLINK", mode|os.ModeSymlink
		}
		secs, _ := strconv.ParseFloat(f[6], 64)
		e := map[string]any{"name": path.Base(f[0]), "type": typ, "path": f[0], "size": f[2], "mode": uint32(mode),
			"permissions": mode.String(), "owner": f[4], "group": f[5],
			"modifiedTime": time.Unix(0, int64(secs*1e9)).UTC().Format(time.RFC3339Nano)}
		if f[1] == "l" {
			e["symlinkTarget"] = f[7]
		}
		entries = append(entries, e)
	}
	return entries
}

// A watcher polls a directory's listing and turns its changes into
// FilesystemEvents: names relative to the directory.
type watcher struct {
	mu     sync.Mutex
	events []map[string]any
	notify chan struct{}
	err    error
	cancel context.CancelFunc
}

// snapshotScript lists the tree under $0 ($1: the depth) with sizes and
// times, for change detection.
const snapshotScript = `[ -d "$0" ] || exit 5; find "$0" -mindepth 1 -maxdepth "$1" -printf '%P\t%y%s.%T@\n'`

func (s *Server) startWatcher(r *http.Request, sb *sandbox, req fsRequest) (*watcher, error) {
	user := requestUser(r, sb)
	p, err := s.resolvePath(r, sb, user, req.Path)
	if err != nil {
		return nil, err
	}
	depth := "1"
	if req.Recursive {
		depth = "64"
	}
	snap := func(ctx context.Context) (map[string]string, error) {
		res, err := s.runAs(ctx, sb, user, nil, "sh", "-c", snapshotScript, p, depth)
		if err == nil && res.code != 0 {
			err = &pathError{p, fileStatus(res)}
		}
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for line := range strings.SplitSeq(strings.TrimSpace(string(res.stdout)), "\n") {
			if name, v, ok := strings.Cut(line, "\t"); ok {
				out[name] = v
			}
		}
		return out, nil
	}
	prev, err := snap(r.Context())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(sb.ctx)
	wt := &watcher{notify: make(chan struct{}, 1), cancel: cancel}
	s.wg.Go(func() {
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cur, err := snap(ctx)
			if err != nil {
				wt.add(nil, err)
				return
			}
			var evs []map[string]any
			for name, v := range cur {
				old, ok := prev[name]
				switch {
				case !ok:
					evs = append(evs, map[string]any{"name": name, "type": "EVENT_TYPE_CREATE"})
				case old != v:
					evs = append(evs, map[string]any{"name": name, "type": "EVENT_TYPE_WRITE"})
				}
			}
			for name := range prev {
				if _, ok := cur[name]; !ok {
					evs = append(evs, map[string]any{"name": name, "type": "EVENT_TYPE_REMOVE"})
				}
			}
			prev = cur
			if len(evs) > 0 {
				wt.add(evs, nil)
			}
		}
	})
	return wt, nil
}

func (wt *watcher) add(evs []map[string]any, err error) {
	wt.mu.Lock()
	wt.events = append(wt.events, evs...)
	if err != nil {
		wt.err = err
	}
	wt.mu.Unlock()
	select {
	case wt.notify <- struct{}{}:
	default:
	}
}

func (wt *watcher) take() ([]map[string]any, error) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	evs := wt.events
	wt.events = nil
	return evs, wt.err
}

func (s *Server) handleWatchDir(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req fsRequest
	if !streamRequest(w, r, &req) {
		return
	}
	wt, err := s.startWatcher(r, sb, req)
	if err != nil {
		if sb.ctx.Err() != nil {
			abort()
		}
		code := codeInternal
		switch {
		case errors.Is(err, fs.ErrNotExist):
			code = codeNotFound
		case errors.Is(err, errNotDir), errors.Is(err, errNoUser):
			code = codeInvalidArgument
		}
		newStreamWriter(w).finish(code, err.Error())
		return
	}
	defer wt.cancel()
	sw := newStreamWriter(w)
	if sw.frame(0, map[string]any{"start": map[string]any{}}) != nil {
		return
	}
	pushLoop(r, sb, sw, map[string]any{"keepalive": map[string]any{}}, wt.notify, func() bool {
		evs, err := wt.take()
		for _, e := range evs {
			if sw.frame(0, map[string]any{"filesystem": e}) != nil {
				return true
			}
		}
		if err != nil {
			sw.finish(codeNotFound, err.Error())
		}
		return err != nil
	})
}

func (s *Server) handleCreateWatcher(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req fsRequest
	if !unaryRequest(w, r, &req) {
		return
	}
	wt, err := s.startWatcher(r, sb, req)
	if err != nil {
		s.fsError(w, sb, err)
		return
	}
	id := randomString(16, lowerDigits)
	sb.homesMu.Lock()
	sb.watchers[id] = wt
	sb.homesMu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"watcherId": id})
}

func (s *Server) watcherOf(w http.ResponseWriter, r *http.Request, remove bool) (*watcher, bool) {
	sb := sandboxOf(r)
	var req fsRequest
	if !unaryRequest(w, r, &req) {
		return nil, false
	}
	sb.homesMu.Lock()
	wt, ok := sb.watchers[req.WatcherID]
	if remove {
		delete(sb.watchers, req.WatcherID)
	}
	sb.homesMu.Unlock()
	if !ok {
		writeConnectError(w, codeNotFound, "watcher "+req.WatcherID+" not found")
	}
	return wt, ok
}

func (s *Server) handleGetWatcherEvents(w http.ResponseWriter, r *http.Request) {
	wt, ok := s.watcherOf(w, r, false)
	if !ok {
		return
	}
	evs, err := wt.take()
	if err != nil && len(evs) == 0 {
		writeConnectError(w, codeNotFound, err.Error())
		return
	}
	if evs == nil {
		evs = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

func (s *Server) handleRemoveWatcher(w http.ResponseWriter, r *http.Request) {
	wt, ok := s.watcherOf(w, r, true)
	if !ok {
		return
	}
	wt.cancel()
	writeJSON(w, http.StatusOK, map[string]any{})
}
