package cutproxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/conformance/internal/cutproxy"
)

// echo serves a line echo on loopback.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader) error {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		t.Fatalf("echo = %q", line)
	}
	return err
}

// waitCut reads from c until the proxy cuts it, under a deadline.
func waitCut(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("read a byte from a connection that should be cut")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection was not cut within 10s")
	}
}

func TestProxy(t *testing.T) {
	target := echo(t)
	tests := []struct {
		name     string
		idle     time.Duration
		drop     bool
		idleCuts int64
		drops    int64
	}{
		{"idle bound cuts a silent connection", 300 * time.Millisecond, false, 1, 0},
		{"drop cuts a busy one", -1, true, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := cutproxy.Start(target, tt.idle)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			if err := roundTrip(t, c, r); err != nil {
				t.Fatalf("through the proxy: %v", err)
			}
			if tt.drop {
				if n := p.Drop(); n != 1 {
					t.Errorf("Drop() = %d, want the one connection", n)
				}
			}
			waitCut(t, c, r)
			if p.IdleCuts() != tt.idleCuts || p.Drops() != tt.drops {
				t.Errorf("IdleCuts, Drops = %d, %d, want %d, %d", p.IdleCuts(), p.Drops(), tt.idleCuts, tt.drops)
			}
		})
	}
}

// TestProxy_ActiveSurvives keeps a connection busy past the idle bound.
func TestProxy_ActiveSurvives(t *testing.T) {
	p, err := cutproxy.Start(echo(t), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); <-tick.C {
		if err := roundTrip(t, c, r); err != nil {
			t.Fatalf("a busy connection was cut: %v", err)
		}
	}
	if p.IdleCuts() != 0 {
		t.Errorf("IdleCuts = %d, want 0", p.IdleCuts())
	}
}

// TestProxy_Transport cuts responses at the client's end: Drop cuts a
// streaming body, and the idle bound one that went silent.
func TestProxy_Transport(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tests := []struct {
		name            string
		idle            time.Duration
		drop            bool
		idleCuts, drops int64
	}{
		{"drop", -1, true, 0, 1},
		{"idle", 300 * time.Millisecond, false, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := cutproxy.Start("", tt.idle)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			client := &http.Client{Transport: p.Transport(http.DefaultTransport)}
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			if line, err := r.ReadString('\n'); err != nil || line != "first\n" {
				t.Fatalf("first line = %q, %v", line, err)
			}
			if tt.drop {
				if n := p.Drop(); n != 1 {
					t.Errorf("Drop() = %d, want the one response", n)
				}
			}
			done := make(chan error, 1)
			go func() { _, err := r.ReadByte(); done <- err }()
			select {
			case err := <-done:
				if err == nil {
					t.Error("read a byte from a cut response")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the response was not cut within 10s")
			}
			if p.IdleCuts() != tt.idleCuts || p.Drops() != tt.drops {
				t.Errorf("IdleCuts, Drops = %d, %d, want %d, %d", p.IdleCuts(), p.Drops(), tt.idleCuts, tt.drops)
			}
		})
	}
}
