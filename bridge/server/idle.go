package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// idleClock keeps the time of the bridge's last turn activity: the end
// of a run (from the store), and the end of a request that is a turn or a
// stream (turnRequest). Nothing else moves it.
type idleClock struct {
	mu     sync.Mutex
	active int
	last   time.Time
}

// turnRequest reports whether r is turn activity: a turn's admission or an
// attached event stream.
func turnRequest(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/v1/chat/completions":
		return true
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/runs/") && strings.HasSuffix(p, "/events"):
		return true
	case strings.HasPrefix(p, "/v1/sessions/"):
		for _, s := range []string{"/turns", "/continue", "/input", "/steer", "/events"} {
			if strings.HasSuffix(p, s) {
				return true
			}
		}
	}
	return false
}

// track counts r as activity while it is served, when it is a turn
// request; the returned func ends it.
func (c *idleClock) track(r *http.Request) func() {
	if !turnRequest(r) {
		return func() {}
	}
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.active--
		c.last = time.Now()
		c.mu.Unlock()
	}
}

// idle reports the bridge's idle time.
func (s *Server) idle(ctx context.Context) *wire.Idle {
	live := s.opts.Engine.LiveCount()
	ended, err := s.opts.Engine.Store().LastRunEnd(ctx)
	s.clock.mu.Lock()
	active, last := s.clock.active, s.clock.last
	s.clock.mu.Unlock()
	if ended.After(last) {
		last = ended
	}
	if s.started.After(last) {
		last = s.started
	}
	out := &wire.Idle{LiveRuns: live, Streams: active}
	if live > 0 || active > 0 || err != nil {
		return out
	}
	out.IdleMS, out.Since = max(0, time.Since(last).Milliseconds()), last.UnixMilli()
	return out
}
