package daytonaemu

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/websocket"

	"github.com/tangle-network/boxctl/vendors"
)

// The daemon marks each line of a command's log with its stream.
var (
	stdoutPrefix = []byte{0x01, 0x01, 0x01}
	stderrPrefix = []byte{0x02, 0x02, 0x02}
)

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
