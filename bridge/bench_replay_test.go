package bridge

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// BenchmarkReplay replays a finished turn's 10,000 stored deltas (and its
// terminal chunk) over SSE from cursor 0. Each op replays the turn twice,
// alternately: once through the bridge's route (GET /v1/runs/:id/events)
// and once through oldReplay, a frozen copy of the replay path as it was
// before it was made cheaper, serving the same database over the same
// HTTP stack, so that the shared machine's noise falls on both alike.
// events/s is the bridge's replay rate, old-events/s the frozen copy's,
// and old-ratio the bridge's rate over the frozen copy's; cpu-ns/event
// and old-cpu-ns/event are this process's CPU time per replayed event.
// Target: old-ratio at least 3.
func BenchmarkReplay(b *testing.B) {
	bb := newBenchBridge(b)
	ctx := context.Background()
	if _, err := bb.streamTurn(ctx, "replay", "many:"+strconv.Itoa(benchDeltas)); err != nil {
		b.Fatal(err)
	}
	old := httptest.NewServer(newOldReplay(b, bb.data))
	b.Cleanup(old.Close)
	replay := func(url string) (time.Duration, time.Duration) {
		c0, t0 := cpuTime(syscall.RUSAGE_SELF), time.Now()
		resp, err := benchRequest(ctx, url, "GET", "/v1/runs/replay/events", "")
		if err != nil {
			b.Fatal(err)
		}
		n, err := countFrames(resp.Body)
		resp.Body.Close()
		if err != nil || n != benchDeltas+1 {
			b.Fatalf("%s replayed %d frames (%v), want %d", url, n, err, benchDeltas+1)
		}
		return time.Since(t0), cpuTime(syscall.RUSAGE_SELF) - c0
	}
	var cur, prev, curCPU, prevCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, c := replay(old.URL)
		prev, prevCPU = prev+d, prevCPU+c
		d, c = replay(bb.url)
		cur, curCPU = cur+d, curCPU+c
	}
	events := float64((benchDeltas + 1) * b.N)
	b.ReportMetric(events/cur.Seconds(), "events/s")
	b.ReportMetric(events/prev.Seconds(), "old-events/s")
	b.ReportMetric(prev.Seconds()/cur.Seconds(), "old-ratio")
	b.ReportMetric(float64(curCPU.Nanoseconds())/events, "cpu-ns/event")
	b.ReportMetric(float64(prevCPU.Nanoseconds())/events, "old-cpu-ns/event")
}

// oldReplay is a frozen copy of the bridge's replay of a finished run's
// events as it was at commit 227e669, before the replay path was made
// cheaper, kept as BenchmarkReplay's baseline: the store's event read (a
// statement parsed per page, each event copied out of the database), pages
// of at most 256 events, each formatted into a buffer and written with its
// own write deadline and flush. It serves GET /v1/runs/{id}/events of a
// terminal run from cursor 0 and leaves out the route's run lookup, which
// makes it a little faster than the code it copies.
type oldReplay struct{ db *sql.DB }

func newOldReplay(b *testing.B, dataDir string) *oldReplay {
	path := filepath.Join(dataDir, store.FileName)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate&_pragma=query_only(1)")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	b.Cleanup(func() { db.Close() })
	return &oldReplay{db: db}
}

// events is the store's Events as it was: up to limit events after after.
func (o *oldReplay) events(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT first_seq, data FROM segments WHERE run_id = ? AND last_seq > ?
		ORDER BY last_seq`, id, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for len(out) < limit && rows.Next() {
		var first int64
		var data []byte
		if err := rows.Scan(&first, &data); err != nil {
			return nil, err
		}
		for seq := first; len(data) > 0 && len(out) < limit; seq++ {
			l, k := binary.Uvarint(data)
			if k <= 0 || l > uint64(len(data)-k) {
				return nil, fmt.Errorf("corrupt event segment at event %d", seq)
			}
			if seq > after {
				out = append(out, store.Event{Seq: seq, Data: data[k : k+int(l) : k+int(l)]})
			}
			data = data[k+int(l):]
		}
	}
	return out, rows.Err()
}

func (o *oldReplay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, "/v1/runs/")
	if id, ok = strings.CutSuffix(id, "/events"); !ok || r.Header.Get("Authorization") != "Bearer "+procBearer {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{})
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(fmt.Appendf(nil, ": connected\n\n")) {
		return
	}
	var after int64
	var buf []byte
	for {
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		evs, err := o.events(ctx, id, after, 256)
		cancel()
		if err != nil {
			write(fmt.Appendf(nil, "data: %s\n\n", `{"error":{"type":"server_error"}}`))
			return
		}
		if len(evs) == 0 {
			write(fmt.Appendf(nil, "data: %s\n\n", wire.DoneData))
			return
		}
		if evs[0].Seq != after+1 {
			write(fmt.Appendf(nil, "data: %s\n\n", `{"error":{"type":"expired_replay_cursor"}}`))
			return
		}
		after = evs[len(evs)-1].Seq
		buf = buf[:0]
		for _, ev := range evs {
			buf = append(buf, "id: "...)
			buf = strconv.AppendInt(buf, ev.Seq, 10)
			buf = append(buf, "\ndata: "...)
			buf = append(buf, ev.Data...)
			buf = append(buf, "\n\n"...)
		}
		if !write(buf) {
			return
		}
	}
}
