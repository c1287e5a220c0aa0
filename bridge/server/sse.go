package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// stream writes a run's events after cursor as a legacy SSE stream: a
// `: connected` comment, `id:`/`data:` frames, `: keepalive` comments when
// idle, and `data: [DONE]` once the run is terminal and fully sent. The
// caller has set the headers it wants and validated the cursor. Returning
// (the client went away) detaches only this reader.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, cursor int64) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(format string, args ...any) bool {
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(": connected\n\n") {
		return
	}
	rd := s.opts.Engine.NewReader(id, cursor)
	defer rd.Close()
	var buf []byte
	for {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.Keepalive)
		evs, err := rd.Next(ctx)
		cancel()
		switch {
		case err == nil:
			// One write per page: formatting each frame with fmt and
			// writing it alone cost more than reading it from the store.
			buf = buf[:0]
			for _, ev := range evs {
				buf = append(buf, "id: "...)
				buf = strconv.AppendInt(buf, ev.Seq, 10)
				buf = append(buf, "\ndata: "...)
				buf = append(buf, ev.Data...)
				buf = append(buf, "\n\n"...)
			}
			if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
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
			write("data: %s\n\n", mustJSON(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeExpiredReplayCursor,
				Message: "events this reader had not read yet were dropped by retention", RunID: id, RequestedEventID: &c}}))
			write("data: %s\n\n", wire.DoneData)
			return
		case r.Context().Err() != nil:
			return
		default:
			s.log.Error("read run events", "run", id, "err", err)
			write("data: %s\n\n", mustJSON(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeServerError,
				Message: "reading the run's events failed"}}))
			write("data: %s\n\n", wire.DoneData)
			return
		}
	}
}
