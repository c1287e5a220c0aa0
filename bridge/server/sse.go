package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// streamPage is about the most event bytes one page of an event stream
// carries: the frames read together, written and then flushed.
const streamPage = 1 << 20

// streamChunk is the size of the writes a page goes out in, from a buffer
// of that size: the client reads the first frames of a page while the
// rest are built, and no buffer grows with the page.
const streamChunk = 64 << 10

// pageBufs are the buffers pages of event streams are built in.
var pageBufs = sync.Pool{New: func() any { b := make([]byte, 0, streamChunk); return &b }}

// stream writes a run's events after cursor as a legacy SSE stream: a
// `: connected` comment, `id:`/`data:` frames, `: keepalive` comments when
// idle, and `data: [DONE]` once the run is terminal and fully sent. The
// caller has set the headers it wants and validated the cursor. Returning
// (the client went away) detaches only this reader.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, cursor int64) {
	sw := s.startStream(w)
	defer sw.end()
	write := func(format string, args ...any) bool { return sw.write(fmt.Appendf(nil, format, args...)) }
	if !write(": connected\n\n") {
		return
	}
	rd := s.opts.Engine.NewReader(id, cursor)
	defer rd.Close()
	bp := pageBufs.Get().(*[]byte)
	defer pageBufs.Put(bp)
	pg := &page{sw: sw, buf: (*bp)[:0]}
	for {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.Keepalive)
		// A page goes out in a few large writes and one flush: formatting
		// each frame with fmt and writing it alone cost more than reading
		// it from the store.
		sw.startPage()
		err := rd.NextFunc(ctx, streamPage, pg.frame)
		cancel()
		switch {
		case err == nil:
			ok := !pg.failed && sw.write(pg.buf[:pg.n])
			pg.n = 0
			if !ok {
				return
			}
		case errors.Is(err, engine.ErrEnd):
			write("data: %s\n\n", wire.DoneData)
			return
		case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			if !write(": keepalive\n\n") {
				return
			}
		case errors.Is(err, engine.ErrFellBehind):
			c := rd.Cursor()
			write("data: %s\n\n", wire.MustJSON(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeExpiredReplayCursor,
				Message: "events this reader had not read yet were dropped by retention", RunID: id, RequestedEventID: &c}}))
			write("data: %s\n\n", wire.DoneData)
			return
		case r.Context().Err() != nil:
			return
		default:
			s.log.Error("read run events", "run", id, "err", err)
			write("data: %s\n\n", wire.MustJSON(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeServerError,
				Message: "reading the run's events failed"}}))
			write("data: %s\n\n", wire.DoneData)
			return
		}
	}
}

// page builds the frames of a page of an event stream, straight from the
// store's (or the run's) buffers, in a buffer of streamChunk bytes that it
// writes out whenever it is full. Building a frame changes only the
// buffer's fill, never the buffer: it stores no pointer into the heap, so
// it costs no write barrier while a collection runs (those cost more than
// formatting the frame).
type page struct {
	sw     *streamWriter
	buf    []byte // the page's buffer, of capacity streamChunk
	n      int    // how much of buf is filled
	failed bool   // a write failed: the client is gone
}

func (p *page) frame(seq int64, data []byte) {
	if p.failed {
		return
	}
	b := p.buf[:p.n]
	if len(b)+len(data)+32 > cap(b) && len(b) > 0 {
		p.failed = !p.sw.writeChunk(b)
		b = b[:0]
	}
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, "\ndata: "...)
	if len(b)+len(data)+2 > cap(b) {
		// A frame larger than the buffer goes out from its own bytes.
		p.failed = p.failed || !p.sw.writeChunk(b) || !p.sw.writeChunk(data)
		b = b[:0]
	} else {
		b = append(b, data...)
	}
	b = append(b, "\n\n"...)
	p.n = len(b)
}

// streamWriter writes an event stream. Each write, with its flush, must
// be taken by the client within Options.StreamWriteTimeout: a client that
// stopped reading fails the write and is dropped, as if it had gone. The
// run and its other readers never wait for any reader: they read the
// store on their own.
type streamWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	bound time.Duration
	paged bool // startPage set the bound of the next write
}

// startStream sends the headers of an event stream.
func (s *Server) startStream(w http.ResponseWriter) *streamWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &streamWriter{w: w, rc: http.NewResponseController(w), bound: s.opts.StreamWriteTimeout}
}

func (sw *streamWriter) write(b []byte) bool {
	if !sw.paged {
		sw.startPage()
	}
	sw.paged = false
	if _, err := sw.w.Write(b); err != nil {
		return false
	}
	return sw.rc.Flush() == nil
}

// startPage bounds the writes up to the next write's flush: a page's
// chunks and its last write are taken within one bound.
func (sw *streamWriter) startPage() {
	// A writer that cannot bound its writes (none of net/http's) writes
	// unbounded rather than not at all.
	sw.rc.SetWriteDeadline(time.Now().Add(sw.bound))
	sw.paged = true
}

// writeChunk writes a part of a page, which the page's write flushes.
func (sw *streamWriter) writeChunk(b []byte) bool {
	_, err := sw.w.Write(b)
	return err == nil
}

// end lifts the write bound off the connection, which may serve another
// request.
func (sw *streamWriter) end() { sw.rc.SetWriteDeadline(time.Time{}) }
