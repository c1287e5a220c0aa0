package bridge

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
)

// serveForLimits runs Serve on a free loopback port with fakeclaude as
// its claude backend and the connection limits mod sets; it returns the
// address. The server stops at the end of the test.
func serveForLimits(t *testing.T, mod func(*Config)) string {
	t.Helper()
	c, err := ConfigFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	c.Port, c.DataDir, c.Bins["claude"] = 0, t.TempDir(), bridgetest.FakeClaude(t)
	mod(&c)
	ctx, cancel := context.WithCancel(context.Background())
	addr, served := make(chan string, 1), make(chan error, 1)
	go func() { served <- Serve(ctx, c, slog.New(slog.DiscardHandler), func(a string) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	select {
	case a := <-addr:
		return a
	case err := <-served:
		t.Fatalf("Serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not start listening")
	}
	return ""
}

// rawConn is a client connection written by hand.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

func (c *rawConn) send(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// response reads one response within wait; nil if none came by then.
func (c *rawConn) response(t *testing.T, wait time.Duration) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(c.r, nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, ""
	}
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return resp, string(body)
}

// closedWithin waits up to wait for the server to close the connection
// and returns how long that took; it fails if the connection stays open
// or carries more bytes.
func (c *rawConn) closedWithin(t *testing.T, wait time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(wait))
	n, err := c.r.Read(make([]byte, 1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("connection still open after %v", wait)
	case err == nil:
		t.Fatalf("read %d more bytes, want the connection closed", n)
	}
	return time.Since(start)
}

const health = "GET /health HTTP/1.1\r\nHost: bridge\r\n\r\n"

// TestServe_ConnectionLimits holds connections the way a careless or
// hostile client does and shows that the bridge bounds each: a body that
// never arrives, one that arrives a byte at a time, an idle keep-alive
// connection, and connections over the cap (which wait until one
// closes). An SSE stream outlives the body and idle bounds.
func TestServe_ConnectionLimits(t *testing.T) {
	const bodyTimeout, connIdle = 500 * time.Millisecond, 500 * time.Millisecond
	bounded := func(c *Config) { c.BodyTimeout, c.ConnIdle, c.Keepalive = bodyTimeout, connIdle, 50*time.Millisecond }
	post := "POST /v1/chat/completions HTTP/1.1\r\nHost: bridge\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"

	for _, tc := range []struct {
		name    string
		dribble bool // a byte every 50 ms, well within any timeout per read
	}{{"body never arrives", false}, {"body a byte at a time", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, serveForLimits(t, bounded))
			start := time.Now()
			c.send(t, post+`{"model":`)
			stop := make(chan struct{})
			defer close(stop)
			if tc.dribble {
				go func() {
					tick := time.NewTicker(50 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := c.Write([]byte(" ")); err != nil {
								return
							}
						}
					}
				}()
			}
			resp, body := c.response(t, 10*time.Second)
			took := time.Since(start)
			if resp == nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "did not arrive within 500ms") {
				t.Fatalf("response = %v %q, want 400 naming the body timeout", resp, body)
			}
			c.closedWithin(t, 5*time.Second)
			t.Logf("answered and closed after %v (BodyTimeout %v)", took.Round(time.Millisecond), bodyTimeout)
			if took < bodyTimeout {
				t.Errorf("answered after %v, before the body timeout %v", took, bodyTimeout)
			}
		})
	}

	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t, serveForLimits(t, bounded))
		c.send(t, health)
		if resp, _ := c.response(t, 10*time.Second); resp == nil || resp.Close {
			t.Fatalf("GET /health = %v, want a kept-alive answer", resp)
		}
		took := c.closedWithin(t, 10*time.Second)
		t.Logf("idle keep-alive connection closed after %v (ConnIdle %v)", took.Round(time.Millisecond), connIdle)
		if took < connIdle/2 {
			t.Errorf("closed after %v, long before ConnIdle %v", took, connIdle)
		}
	})

	t.Run("over the cap", func(t *testing.T) {
		addr := serveForLimits(t, func(c *Config) { c.MaxConns = 2 })
		held := []*rawConn{dial(t, addr), dial(t, addr)}
		for i, c := range held {
			c.send(t, health)
			if resp, _ := c.response(t, 10*time.Second); resp == nil {
				t.Fatalf("held connection %d got no answer", i)
			}
		}
		extra := dial(t, addr) // the kernel accepts it; the bridge does not yet
		extra.send(t, health)
		if resp, _ := extra.response(t, 300*time.Millisecond); resp != nil {
			t.Fatalf("a connection over the cap of 2 was served: %s", resp.Status)
		}
		held[0].Close()
		start := time.Now()
		if resp, _ := extra.response(t, 10*time.Second); resp == nil {
			t.Fatal("the waiting connection was not served after a held one closed")
		}
		t.Logf("the waiting connection was served %v after a slot freed", time.Since(start).Round(time.Millisecond))
		held[1].send(t, health) // a held connection keeps working
		if resp, _ := held[1].response(t, 10*time.Second); resp == nil {
			t.Fatal("a held connection stopped answering")
		}
	})

	t.Run("SSE stream outlives the bounds", func(t *testing.T) {
		c := dial(t, serveForLimits(t, bounded))
		body := `{"model":"claude-code/sonnet","stream":true,"run_id":"sse-long","messages":[{"role":"user","content":"stall"}]}`
		c.send(t, "POST /v1/chat/completions HTTP/1.1\r\nHost: bridge\r\nContent-Type: application/json\r\nContent-Length: "+
			strconv.Itoa(len(body))+"\r\n\r\n"+body)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stream = %v, %v", resp, err)
		}
		start, keepalives := time.Now(), 0
		sc := bufio.NewScanner(resp.Body)
		for time.Since(start) < 4*(bodyTimeout+connIdle) {
			if !sc.Scan() {
				t.Fatalf("the stream ended after %v (%v), want it open past the body and idle bounds", time.Since(start), sc.Err())
			}
			if sc.Text() == ": keepalive" {
				keepalives++
			}
		}
		t.Logf("SSE stream still open after %v, %d keepalives", time.Since(start).Round(time.Millisecond), keepalives)
	})
}
