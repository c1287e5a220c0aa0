package e2bemu

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// envd's process service (process.proto), over the Docker vendor's
// spawned processes. A process lives on its own: its output is pumped to
// whoever subscribes (the Start stream from the start, a Connect stream
// from when it connects), and dropping a stream leaves it running.

// processConfig is ProcessConfig.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

// selector is ProcessSelector.
type selector struct {
	PID *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

func (s selector) String() string {
	switch {
	case s.PID != nil:
		return fmt.Sprintf("pid %d", *s.PID)
	case s.Tag != nil:
		return "tag " + *s.Tag
	}
	return "no selector"
}

// event is a ProcessEvent's oneof, as protojson writes it.
type event map[string]any

type procTable struct {
	sb    *sandbox
	mu    sync.Mutex
	next  uint32
	procs map[uint32]*proc // live and ended (ended ones keep their end)
}

func newProcTable(sb *sandbox) *procTable {
	return &procTable{sb: sb, next: 1000, procs: map[uint32]*proc{}}
}

type proc struct {
	pid uint32
	tag *string
	cfg processConfig
	ep  *execProc

	mu    sync.Mutex
	subs  map[*subscriber]struct{}
	ended bool
	end   event
}

// subscriber receives a process's events in order, unbounded.
type subscriber struct {
	mu     sync.Mutex
	queue  []event
	notify chan struct{}
	closed bool // the end was queued
}

func (s *subscriber) push(e event, last bool) {
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.closed = s.closed || last
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// take returns the queued events and whether the end is among them.
func (s *subscriber) take() ([]event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q, s.closed
}

func (p *proc) subscribe() *subscriber {
	sub := &subscriber{notify: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		sub.push(p.end, true)
		return sub
	}
	p.subs[sub] = struct{}{}
	return sub
}

func (p *proc) unsubscribe(sub *subscriber) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.subs, sub)
}

func (p *proc) publish(e event, last bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if last {
		p.ended, p.end = true, e
	}
	for sub := range p.subs {
		sub.push(e, last)
	}
	if last {
		p.subs = nil
	}
}

// lookup finds a process by selector.
func (t *procTable) lookup(sel selector) (*proc, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sel.PID != nil {
		p, ok := t.procs[*sel.PID]
		return p, ok
	}
	if sel.Tag != nil {
		// The live process of the tag, else the latest ended one.
		var found *proc
		for _, p := range t.procs {
			if p.tag == nil || *p.tag != *sel.Tag {
				continue
			}
			p.mu.Lock()
			ended := p.ended
			p.mu.Unlock()
			if !ended {
				return p, true
			}
			if found == nil || p.pid > found.pid {
				found = p
			}
		}
		return found, found != nil
	}
	return nil, false
}

// start starts a process and pumps its output to subscribers; sub, when
// not nil, is subscribed before any output.
func (s *Server) start(ctx context.Context, sb *sandbox, cfg processConfig, spec execSpec, tag *string, sub *subscriber) (*proc, error) {
	ep, err := s.execStart(ctx, sb, spec)
	if err != nil {
		return nil, err
	}
	t := sb.procs
	t.mu.Lock()
	t.next++
	pid := t.next
	t.mu.Unlock()
	p := &proc{pid: pid, tag: tag, cfg: cfg, ep: ep, subs: map[*subscriber]struct{}{}}
	if sub != nil {
		p.subs[sub] = struct{}{}
	}
	t.mu.Lock()
	t.procs[pid] = p
	t.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.pump(sb, p)
	}()
	return p, nil
}

// dataWriter publishes what is written as data events of one stream.
type dataWriter struct {
	p    *proc
	name string
}

func (d dataWriter) Write(b []byte) (int, error) {
	d.p.publish(event{"data": map[string]any{d.name: bytes.Clone(b)}}, false)
	return len(b), nil
}

// pump streams the process's output as data events, then its end.
func (s *Server) pump(sb *sandbox, p *proc) {
	out := "stdout"
	if p.ep.tty {
		out = "pty"
	}
	_ = p.ep.output(dataWriter{p, out}, dataWriter{p, "stderr"})
	code, werr := s.execWait(sb.ctx, p.ep)
	end := map[string]any{"exited": true, "status": "exit status " + strconv.Itoa(code)}
	switch {
	case werr != nil:
		end = map[string]any{"exited": false, "status": "error", "error": werr.Error()}
	case code > 128 && code < 128+65:
		sig := syscall.Signal(code - 128)
		end = map[string]any{"exitCode": -1, "exited": false, "status": "signal: " + sig.String()}
	case code != 0:
		end["exitCode"] = code
	}
	p.publish(event{"end": end}, true)
}

// streamWriter writes a Connect server stream.
type streamWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newStreamWriter(w http.ResponseWriter) *streamWriter {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	return &streamWriter{w: w, rc: http.NewResponseController(w)}
}

func (sw *streamWriter) frame(flags byte, v any) error {
	msg, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(msg)))
	if _, err := sw.w.Write(append(hdr[:], msg...)); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// send writes one StartResponse / ConnectResponse.
func (sw *streamWriter) send(e event) error { return sw.frame(0, map[string]any{"event": e}) }

// finish writes the end-of-stream frame, with err's code when not nil.
func (sw *streamWriter) finish(code, msg string) {
	end := map[string]any{}
	if code != "" {
		end["error"] = map[string]string{"code": code, "message": msg}
	}
	_ = sw.frame(0x02, end)
}

// streamRequest decodes the single envelope of a streaming call.
func streamRequest(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/connect+json" {
		w.Header().Set("Accept-Post", "application/connect+json, application/connect+proto")
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return false
	}
	var hdr [5]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		newStreamWriter(w).finish(codeInvalidArgument, "read envelope: "+err.Error())
		return false
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if hdr[0]&0x01 != 0 || n > 16<<20 {
		newStreamWriter(w).finish(codeInvalidArgument, "compressed or oversized envelope")
		return false
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r.Body, msg); err != nil {
		newStreamWriter(w).finish(codeInvalidArgument, "read envelope: "+err.Error())
		return false
	}
	if err := json.NewDecoder(bytes.NewReader(msg)).Decode(v); err != nil {
		newStreamWriter(w).finish(codeInvalidArgument, "unmarshal message: "+err.Error())
		return false
	}
	return true
}

// keepalive returns the interval of keepalive events the caller asked
// for (Keepalive-Ping-Interval, seconds), envd's 90s by default.
func keepalive(r *http.Request) time.Duration {
	if n, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval")); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 90 * time.Second
}

// follow answers a Start or Connect stream: the start event, then sub's
// events until the process's end, the caller hanging up, or the sandbox's
// end (which cuts the connection).
func (s *Server) follow(w http.ResponseWriter, r *http.Request, sb *sandbox, p *proc, sub *subscriber) {
	defer p.unsubscribe(sub)
	sw := newStreamWriter(w)
	if sw.send(event{"start": map[string]any{"pid": p.pid}}) != nil {
		return
	}
	pushLoop(r, sb, sw, map[string]any{"event": event{"keepalive": map[string]any{}}}, sub.notify, func() bool {
		evs, last := sub.take()
		for _, e := range evs {
			if sw.send(e) != nil {
				return true
			}
		}
		if last {
			sw.finish("", "")
		}
		return last
	})
}

// pushLoop serves a server stream once its first message is out: on each
// notify, drain writes what came and reports whether the stream is done;
// keep, the stream's keepalive message, goes between (at the interval the
// caller asked for).
// It returns when drain says so, a write fails or the caller hangs up; the
// sandbox's end cuts the connection.
func pushLoop(r *http.Request, sb *sandbox, sw *streamWriter, keep any, notify <-chan struct{}, drain func() bool) {
	every := keepalive(r)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			if sb.ctx.Err() != nil {
				abort()
			}
			return
		case <-tick.C:
			if sw.frame(0, keep) != nil {
				return
			}
		case <-notify:
			if drain() {
				return
			}
			tick.Reset(every)
		}
	}
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct {
		Process *processConfig `json:"process"`
		PTY     *struct {
			Size *ptySize `json:"size"`
		} `json:"pty"`
		Tag   *string `json:"tag"`
		Stdin *bool   `json:"stdin"`
	}
	if !streamRequest(w, r, &req) {
		return
	}
	if req.Process == nil || req.Process.Cmd == "" {
		newStreamWriter(w).finish(codeInvalidArgument, "process.cmd is required")
		return
	}
	user := requestUser(r, sb)
	home, err := s.userHome(r.Context(), sb, user)
	if err != nil {
		if sb.ctx.Err() != nil {
			abort()
		}
		newStreamWriter(w).finish(codeInvalidArgument, "error looking up user: "+err.Error())
		return
	}
	spec := execSpec{cmd: append([]string{req.Process.Cmd}, req.Process.Args...), env: req.Process.Envs, dir: home,
		user: user, stdin: req.Stdin != nil && *req.Stdin}
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		spec.dir = *req.Process.Cwd
	}
	if req.PTY != nil {
		spec.pty = &ptySize{Cols: 80, Rows: 24}
		if req.PTY.Size != nil {
			spec.pty = req.PTY.Size
		}
	}
	sub := &subscriber{notify: make(chan struct{}, 1)}
	p, err := s.start(sb.ctx, sb, *req.Process, spec, req.Tag, sub)
	if err != nil {
		if sb.ctx.Err() != nil {
			abort()
		}
		newStreamWriter(w).finish(codeInvalidArgument, "error starting process: "+err.Error())
		return
	}
	s.follow(w, r, sb, p, sub)
}

func (s *Server) handleProcConnect(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct {
		Process selector `json:"process"`
	}
	if !streamRequest(w, r, &req) {
		return
	}
	p, ok := sb.procs.lookup(req.Process)
	if !ok {
		newStreamWriter(w).finish(codeNotFound, "process with "+req.Process.String()+" not found")
		return
	}
	sub := p.subscribe()
	s.follow(w, r, sb, p, sub)
}

func (s *Server) handleProcList(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct{}
	if !unaryRequest(w, r, &req) {
		return
	}
	out := []map[string]any{}
	sb.procs.mu.Lock()
	for _, p := range sb.procs.procs {
		p.mu.Lock()
		ended := p.ended
		p.mu.Unlock()
		if ended {
			continue
		}
		info := map[string]any{"config": p.cfg, "pid": p.pid}
		if p.tag != nil {
			info["tag"] = *p.tag
		}
		out = append(out, info)
	}
	sb.procs.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"processes": out})
}

// liveProc finds the live process of a selector, answering the error
// itself when there is none.
func liveProc(w http.ResponseWriter, sb *sandbox, sel selector) (*proc, bool) {
	p, ok := sb.procs.lookup(sel)
	if ok {
		p.mu.Lock()
		ok = !p.ended
		p.mu.Unlock()
	}
	if !ok {
		writeConnectError(w, codeNotFound, "process with "+sel.String()+" not found")
	}
	return p, ok
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct {
		Process selector `json:"process"`
		Signal  string   `json:"signal"`
	}
	if !unaryRequest(w, r, &req) {
		return
	}
	var sig string
	switch req.Signal {
	case "SIGNAL_SIGKILL", "9":
		sig = "KILL"
	case "SIGNAL_SIGTERM", "15":
		sig = "TERM"
	default:
		writeConnectError(w, codeInvalidArgument, "invalid signal: "+req.Signal)
		return
	}
	p, ok := liveProc(w, sb, req.Process)
	if !ok {
		return
	}
	if err := s.execSignal(r.Context(), p.ep, sig); err != nil {
		if sb.ctx.Err() != nil {
			abort()
		}
		writeConnectError(w, codeInternal, "error sending signal: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) handleSendInput(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct {
		Process selector `json:"process"`
		Input   struct {
			Stdin []byte `json:"stdin"`
			PTY   []byte `json:"pty"`
		} `json:"input"`
	}
	if !unaryRequest(w, r, &req) {
		return
	}
	p, ok := liveProc(w, sb, req.Process)
	if !ok {
		return
	}
	in := req.Input.Stdin
	if p.ep.tty {
		in = append(in, req.Input.PTY...)
	}
	if !p.ep.tty && req.Input.PTY != nil {
		writeConnectError(w, codeInvalidArgument, "process has no pty")
		return
	}
	if !p.ep.tty && !p.ep.stdin {
		writeConnectError(w, codeFailedPrecondition, "stdin not enabled for process "+req.Process.String())
		return
	}
	if err := p.ep.write(in); err != nil {
		writeConnectError(w, codeFailedPrecondition, "error writing to stdin: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) handleCloseStdin(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct {
		Process selector `json:"process"`
	}
	if !unaryRequest(w, r, &req) {
		return
	}
	p, ok := liveProc(w, sb, req.Process)
	if !ok {
		return
	}
	if err := p.ep.closeStdin(); err != nil {
		writeConnectError(w, codeInternal, "error closing stdin: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

func (s *Server) handleUpdate(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct {
		Process selector `json:"process"`
		PTY     *struct {
			Size *ptySize `json:"size"`
		} `json:"pty"`
	}
	if !unaryRequest(w, r, &req) {
		return
	}
	p, ok := liveProc(w, sb, req.Process)
	if !ok {
		return
	}
	if req.PTY != nil && req.PTY.Size != nil {
		if !p.ep.tty {
			writeConnectError(w, codeInvalidArgument, "process has no pty")
			return
		}
		if err := s.execResize(r.Context(), p.ep, *req.PTY.Size); err != nil {
			writeConnectError(w, codeInternal, "error resizing pty: "+err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}
