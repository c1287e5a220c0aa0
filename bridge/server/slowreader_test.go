package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// stuckClient is a client that takes the stream's first write and then
// stops reading: every later write waits for the write deadline the
// server set, as a full TCP window does, and fails at it. Without a
// deadline it waits for good.
type stuckClient struct {
	header   http.Header
	mu       sync.Mutex
	deadline time.Time
	writes   int
}

func (c *stuckClient) Header() http.Header { return c.header }
func (c *stuckClient) WriteHeader(int)     {}
func (c *stuckClient) FlushError() error   { return nil }

func (c *stuckClient) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	return nil
}

func (c *stuckClient) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	n, d := c.writes, c.deadline
	c.mu.Unlock()
	if n == 1 {
		return len(b), nil
	}
	if d.IsZero() {
		select {}
	}
	<-time.After(time.Until(d)) // the network gives up at the deadline
	return 0, os.ErrDeadlineExceeded
}

// TestSlowReaderDropped: a reader that stops reading is dropped after
// the write bound, while the run goes on to its end and another reader
// gets the whole stream.
func TestSlowReaderDropped(t *testing.T) {
	tests := []struct {
		name  string
		start func(t *testing.T, v *env) (run string, follow func(t *testing.T) bool)
		path  string
	}{
		{"chat run", func(t *testing.T, v *env) (string, func(*testing.T) bool) {
			resp, _ := openStream(t, v, chatBody("r1", "slow:20:10", true))
			return "r1", func(t *testing.T) bool { return readSSE(t, resp.Body).done }
		}, "/v1/runs/r1/events"},
		{"retained turn", func(t *testing.T, v *env) (string, func(*testing.T) bool) {
			createSession(t, v, "s1", "")
			postTurn(t, v, "s1", turnBody("t1", "r1", "slow:20:10"))
			live := openEvents(t, v, "/v1/runs/r1/events", "")
			return "r1", func(t *testing.T) bool {
				frames := live.until(isTerminal)
				return len(frames) > 0 && isTerminal(frames[len(frames)-1])
			}
		}, "/v1/sessions/s1/events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The bound is long enough that the reader that keeps reading is
			// never dropped on a loaded machine, and short enough that the
			// stuck one is dropped within the test's time.
			v := newEnv(t, config{server: Options{StreamWriteTimeout: time.Second}})
			run, follow := tt.start(t, v)
			req := httptest.NewRequestWithContext(t.Context(), "GET", tt.path, nil)
			req.Header.Set("Authorization", "Bearer "+bearer)
			stuck := &stuckClient{header: http.Header{}}
			dropped := make(chan struct{})
			go func() {
				defer close(dropped)
				v.srv.ServeHTTP(stuck, req)
			}()
			if !follow(t) {
				t.Error("the other reader did not get the whole stream")
			}
			if s := waitRun(t, v, run); s.Status != wire.StatusDone {
				t.Errorf("run = %+v, want done", s)
			}
			deadline := time.NewTimer(30 * time.Second)
			defer deadline.Stop()
			select {
			case <-dropped:
			case <-deadline.C:
				t.Fatal("the reader that stopped reading was never dropped")
			}
			if s := waitRun(t, v, run); s.AttachedReaders != 0 {
				t.Errorf("run has %d attached readers after both left, want 0", s.AttachedReaders)
			}
		})
	}
}
