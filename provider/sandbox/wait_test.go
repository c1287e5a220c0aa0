package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestHealthWait_CrashLoop checks that a box whose supervisor gave up on
// its bridge ends the wait at once with the typed error and the reason.
func TestHealthWait_CrashLoop(t *testing.T) {
	const detail = "box-bridge crashed 5 times in 1m0s; last: exit status 2"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(wire.Health{Status: wire.HealthCrashLoop, Backends: []wire.BackendHealth{
			{Name: "claude-code", State: wire.BackendError, Detail: detail}}})
	}))
	defer srv.Close()
	w := healthWait{URL: srv.URL, Client: srv.Client(), Backend: "claude-code", Timeout: time.Minute}
	_, err := w.WaitUntilReady(context.Background(), nil)
	var ce *BridgeCrashLoopError
	if !errors.As(err, &ce) || !errors.Is(err, ErrBridgeCrashLoop) || ce.Detail != detail {
		t.Errorf("WaitUntilReady = %v, want a *BridgeCrashLoopError with the supervisor's reason", err)
	}
}
