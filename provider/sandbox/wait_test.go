package sandbox

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/supervisor"
)

// TestHealthWait_CrashLoop checks that a box whose supervisor gave up on
// its bridge ends the wait at once with the typed error and the reason.
func TestHealthWait_CrashLoop(t *testing.T) {
	cl := &supervisor.CrashLoopError{Crashes: 5, Window: time.Minute, Last: "exit status 2"}
	srv := httptest.NewServer(supervisor.CrashLoopHandler([]string{"claude-code"}, cl))
	defer srv.Close()
	w := healthWait{URL: srv.URL, Client: srv.Client(), Backend: "claude-code", Timeout: time.Minute}
	_, err := w.WaitUntilReady(context.Background(), nil)
	var ce *BridgeCrashLoopError
	if !errors.As(err, &ce) || !errors.Is(err, ErrBridgeCrashLoop) || !strings.Contains(ce.Detail, "crashed 5 times") ||
		!strings.Contains(ce.Detail, "exit status 2") {
		t.Errorf("WaitUntilReady = %v, want a *BridgeCrashLoopError naming the crashes and the last exit", err)
	}
}
