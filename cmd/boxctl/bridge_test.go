package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// syncBuffer is a bytes.Buffer safe for the bridge's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// freePort is a loopback port that was free a moment ago.
func freePort(t *testing.T) string { return boxbridgetest.FreePort(t) }

// TestBridgeCmd_GlobalFlags runs `boxctl bridge` with the global flags
// before and after the verb and with BRIDGE_LOG_LEVEL, and checks the log
// level the bridge logs at by its info line "listening": --log-level
// wins over the environment, as box-bridge's -log-level does.
func TestBridgeCmd_GlobalFlags(t *testing.T) {
	tests := []struct {
		name, env string
		args      []string
		wantInfo  bool
	}{
		{"default", "", []string{"bridge"}, true},
		{"global flag before the verb", "", []string{"--log-level", "warn", "bridge"}, false},
		{"flag after the verb", "", []string{"bridge", "--log-level=warn"}, false},
		{"environment", "error", []string{"bridge"}, false},
		{"flag over the environment", "error", []string{"bridge", "-log-level", "debug"}, true},
		{"output flag", "warn", []string{"-o", "json", "bridge", "--output=text"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BRIDGE_LOG_LEVEL", tt.env)
			t.Setenv("CLAUDE_BIN", "/nonexistent/claude")
			port := freePort(t)
			var out, errOut syncBuffer
			cmd := newRootCmd(newApp(&out, &errOut))
			cmd.SetArgs(append(tt.args, "-port", port, "-data-dir", t.TempDir()))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()
			polltest.UntilNil(t, 30*time.Second, fmt.Sprintf("boxctl %v to serve /health", tt.args), func() error {
				resp, err := http.Get("http://127.0.0.1:" + port + "/health")
				if err == nil {
					resp.Body.Close()
					return nil
				}
				select {
				case err := <-done:
					t.Fatalf("boxctl %v ended before serving: %v\n%s", tt.args, err, errOut.String())
				default:
				}
				return fmt.Errorf("%w\n%s", err, errOut.String())
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("boxctl %v = %v\n%s", tt.args, err, errOut.String())
			}
			if got := strings.Contains(errOut.String(), "msg=listening"); got != tt.wantInfo {
				t.Errorf("boxctl %v (BRIDGE_LOG_LEVEL=%q) logged the info line: %v, want %v\n%s", tt.args, tt.env, got, tt.wantInfo, errOut.String())
			}
		})
	}
}

func TestBridgeCmd_BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--log-level", "loud", "bridge"},
		{"bridge", "-log-level", "loud"},
		{"bridge", "-o", "yaml"},
		{"bridge", "--nope"},
	} {
		if _, stderr, err := run(t, args...); exitCode(err) != 2 {
			t.Errorf("boxctl %v = %v (exit %d), want a usage error (exit 2)\n%s", args, err, exitCode(err), stderr)
		}
	}
}
