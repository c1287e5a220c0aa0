package e2bemu

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/vendors"
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
	dp  vendors.Process

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

// start spawns a process and pumps its output to subscribers; sub, when
// not nil, is subscribed before any output.
func (s *Server) start(sb *sandbox, cfg processConfig, tag *string, sub *subscriber) (*proc, error) {
	t := sb.procs
	t.mu.Lock()
	t.next++
	pid := t.next
	t.mu.Unlock()
	spec := vendors.SpawnSpec{Name: "envd-" + strconv.FormatUint(uint64(pid), 10) + "-" + randomString(6, lowerDigits),
		Command: append([]string{cfg.Cmd}, cfg.Args...), Env: cfg.Envs}
	if cfg.Cwd != nil {
		spec.Dir = *cfg.Cwd
	}
	dp, err := sb.box.Spawn(sb.ctx, spec)
	if err != nil {
		return nil, err
	}
	p := &proc{pid: pid, tag: tag, cfg: cfg, dp: dp, subs: map[*subscriber]struct{}{}}
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

// pump streams the process's output as data events, then its end.
func (s *Server) pump(sb *sandbox, p *proc) {
	stdout, stderr, err := p.dp.Output(sb.ctx)
	if err == nil {
		var wg sync.WaitGroup
		for _, src := range []struct {
			r    io.ReadCloser
			name string
		}{{stdout, "stdout"}, {stderr, "stderr"}} {
			wg.Go(func() {
				defer src.r.Close()
				buf := make([]byte, 32<<10)
				for {
					n, rerr := src.r.Read(buf)
					if n > 0 {
						p.publish(event{"data": map[string]any{src.name: append([]byte(nil), buf[:n]...)}}, false)
					}
					if rerr != nil {
						return
					}
				}
			})
		}
		wg.Wait()
	}
	code, werr := p.dp.Wait(sb.ctx)
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
			if sw.send(event{"keepalive": map[string]any{}}) != nil {
				return
			}
		case <-sub.notify:
			evs, last := sub.take()
			for _, e := range evs {
				if sw.send(e) != nil {
					return
				}
			}
			if last {
				sw.finish("", "")
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
		Tag     *string        `json:"tag"`
		Stdin   *bool          `json:"stdin"`
	}
	if !streamRequest(w, r, &req) {
		return
	}
	if req.Process == nil || req.Process.Cmd == "" {
		newStreamWriter(w).finish(codeInvalidArgument, "process.cmd is required")
		return
	}
	sub := &subscriber{notify: make(chan struct{}, 1)}
	p, err := s.start(sb, *req.Process, req.Tag, sub)
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

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	sb := sandboxOf(r)
	var req struct {
		Process selector `json:"process"`
		Signal  string   `json:"signal"`
	}
	if !unaryRequest(w, r, &req) {
		return
	}
	var sig syscall.Signal
	switch req.Signal {
	case "SIGNAL_SIGKILL", "9":
		sig = syscall.SIGKILL
	case "SIGNAL_SIGTERM", "15":
		sig = syscall.SIGTERM
	default:
		writeConnectError(w, codeUnimplemented, "invalid signal: "+req.Signal)
		return
	}
	p, ok := sb.procs.lookup(req.Process)
	if ok {
		p.mu.Lock()
		ok = !p.ended
		p.mu.Unlock()
	}
	if !ok {
		writeConnectError(w, codeNotFound, "process with "+req.Process.String()+" not found")
		return
	}
	if err := p.dp.Signal(r.Context(), sig); err != nil {
		if sb.ctx.Err() != nil || errors.Is(err, vendors.ErrNotFound) {
			abort()
		}
		writeConnectError(w, codeInternal, "error sending signal: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}
