package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/buger/jsonparser"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// canonicalWriter writes canonical SSE frames: `id:`, `event:` and a
// runtime envelope as `data:`. The caller ends it (streamWriter.end).
type canonicalWriter struct {
	*streamWriter
}

func (s *Server) startCanonical(w http.ResponseWriter) *canonicalWriter {
	cw := &canonicalWriter{s.startStream(w)}
	cw.raw([]byte(": connected\n\n"))
	return cw
}

func (cw *canonicalWriter) raw(b []byte) bool { return cw.write(b) }

// frames writes stored envelopes; offset renumbers them into a session's
// sequence (0 keeps the run's own).
func (cw *canonicalWriter) frames(evs []store.Event, offset int64) bool {
	var buf []byte
	for _, ev := range evs {
		data := ev.Data
		seq := ev.Seq + offset
		if offset != 0 {
			s := []byte(strconv.FormatInt(seq, 10))
			var err error
			if data, err = jsonparser.Set(data, s, "sequence"); err != nil {
				continue
			}
			if data, err = jsonparser.Set(data, []byte(strconv.Quote(string(s))), "cursor"); err != nil {
				continue
			}
		}
		typ, err := jsonparser.GetString(data, "event", "type")
		if err != nil {
			continue // not an envelope: never written by a retained run
		}
		buf = append(buf, "id: "...)
		buf = strconv.AppendInt(buf, seq, 10)
		buf = append(buf, "\nevent: "...)
		buf = append(buf, typ...)
		buf = append(buf, "\ndata: "...)
		buf = append(buf, data...)
		buf = append(buf, "\n\n"...)
	}
	return cw.raw(buf)
}

// fail ends a stream with an `error` event.
func (cw *canonicalWriter) fail(e wire.ErrorBody) {
	cw.raw([]byte("event: error\ndata: " + string(wire.MustJSON(wire.ErrorResponse{Error: e})) + "\n\n"))
}

// streamRun follows one run from cursor (in the run's sequence) to its
// end, writing its frames renumbered by offset. It returns the reason it
// stopped: errRunEnd when the run is terminal and fully written.
func (s *Server) streamRun(r *http.Request, cw *canonicalWriter, id string, cursor, offset int64) error {
	rd := s.opts.Engine.NewReader(id, cursor)
	defer rd.Close()
	for {
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.Keepalive)
		evs, err := rd.Next(ctx)
		cancel()
		switch {
		case err == nil:
			if !cw.frames(evs, offset) {
				return errClientGone
			}
		case errors.Is(err, engine.ErrEnd):
			return errRunEnd
		case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			if !cw.raw([]byte(": keepalive\n\n")) {
				return errClientGone
			}
		case errors.Is(err, engine.ErrFellBehind):
			c := rd.Cursor() + offset
			cw.fail(wire.ErrorBody{Type: wire.TypeExpiredReplayCursor, RunID: id, RequestedEventID: &c,
				Message: "events this reader had not read yet were dropped by retention"})
			return err
		case r.Context().Err() != nil:
			return errClientGone
		default:
			s.log.Error("read run events", "run", id, "err", err)
			cw.fail(wire.ErrorBody{Type: wire.TypeServerError, Message: "reading the run's events failed"})
			return err
		}
	}
}

var (
	errRunEnd     = errors.New("run ended")
	errClientGone = errors.New("client went away")
)

// retainedRunEvents streams a retained run's events in the canonical
// format, after the caller checked the cursor. It reports false when the
// run is not a retained turn (the caller streams it as legacy).
func (s *Server) retainedRunEvents(w http.ResponseWriter, r *http.Request, run store.Run, cursor int64) bool {
	if _, err := s.opts.Engine.Store().TurnOfRun(r.Context(), run.ID); err != nil {
		return false
	}
	cw := s.startCanonical(w)
	defer cw.end()
	s.streamRun(r, cw, run.ID, cursor, 0)
	return true
}

// sessionEvents streams a session's events: the events of its turns' runs
// in order, numbered in one session-wide sequence (a run's event n is the
// session's event offset+n), from the Last-Event-ID cursor in that
// sequence. The stream follows new turns until the session is closed and
// its last run ended.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) {
	rs, ok := s.sessionOr404(w, r)
	if !ok {
		return
	}
	cursor, err := wire.ParseCursor(r.Header.Get(wire.HeaderLastEventID), r.Header.Get(wire.HeaderXLastEventID))
	if err != nil {
		writeError(w, wire.TypeInvalidRequest, err.Error())
		return
	}
	st := s.opts.Engine.Store()
	turns, err := st.Turns(r.Context(), rs.ID, 0)
	if err != nil {
		s.log.Error("load session turns", "session", rs.ID, "err", err)
		writeError(w, wire.TypeServerError, "load session")
		return
	}
	var last int64
	if n := len(turns); n > 0 {
		run, err := st.GetRun(r.Context(), turns[n-1].RunID)
		if err != nil {
			s.writeRunLookupError(w, turns[n-1].RunID, err)
			return
		}
		last = turns[n-1].Offset + run.LastSeq
	}
	if cursor > last {
		writeErrorBody(w, wire.ErrorBody{Type: wire.TypeInvalidReplayCursor, RequestedEventID: &cursor, LastEventID: &last,
			Message: "replay cursor " + strconv.FormatInt(cursor, 10) + " is ahead of the session's stream"})
		return
	}
	cw := s.startCanonical(w)
	defer cw.end()
	next := int64(0) // index of the next turn to consider
	for {
		wake := s.opts.Engine.SessionNotifier(rs.ID)
		turns, err := st.Turns(r.Context(), rs.ID, next)
		if err != nil {
			cw.fail(wire.ErrorBody{Type: wire.TypeServerError, Message: "reading the session's turns failed"})
			return
		}
		for _, t := range turns {
			run, err := st.GetRun(r.Context(), t.RunID)
			// Retention deletes a session's old turns with their runs;
			// a reader that had not read them cannot go on from here.
			if (t.Index > next && cursor < t.Offset) || errors.Is(err, store.ErrNotFound) {
				c, first := cursor, t.Offset+1
				cw.fail(wire.ErrorBody{Type: wire.TypeExpiredReplayCursor, RequestedEventID: &c, FirstAvailableEventID: &first,
					Message: "turns of the session this reader had not read yet were dropped by retention; read on from event " +
						strconv.FormatInt(first, 10) + " or later"})
				return
			}
			if err != nil {
				cw.fail(wire.ErrorBody{Type: wire.TypeServerError, Message: "reading the session's runs failed"})
				return
			}
			next = t.Index + 1
			if run.Terminal() && cursor >= t.Offset+run.LastSeq {
				continue // already read
			}
			from := max(cursor-t.Offset, 0)
			if err := s.streamRun(r, cw, t.RunID, from, t.Offset); !errors.Is(err, errRunEnd) {
				return
			}
			if run, err = st.GetRun(r.Context(), t.RunID); err != nil {
				return
			}
			cursor = t.Offset + run.LastSeq
		}
		if len(turns) > 0 {
			continue // a turn may have been admitted meanwhile
		}
		cur, err := st.GetSession(r.Context(), rs.ID)
		if err != nil || !cur.ClosedAt.IsZero() {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.opts.Keepalive)
		select {
		case <-wake:
		case <-ctx.Done():
			if r.Context().Err() == nil && !cw.raw([]byte(": keepalive\n\n")) {
				cancel()
				return
			}
		}
		cancel()
		if r.Context().Err() != nil {
			return
		}
	}
}
