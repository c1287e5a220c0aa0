package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestHealthWait_NoAnswer checks that a bridge whose /health never
// answers ends the wait at its timeout with why the last attempt failed.
func TestHealthWait_NoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("no bridge behind this port"))
	}))
	defer srv.Close()
	w := healthWait{URL: srv.URL, Client: srv.Client(), Backend: "claude-code", Timeout: 200 * time.Millisecond, Interval: 10 * time.Millisecond}
	_, err := w.WaitUntilReady(t.Context(), nil)
	var nr *NotReadyError
	if !errors.As(err, &nr) || !errors.Is(err, ErrNotReady) || nr.Last != "" ||
		!strings.Contains(err.Error(), "last attempt: GET /health: 502 no bridge behind this port") {
		t.Errorf("WaitUntilReady = %v, want a *NotReadyError naming the last attempt's answer", err)
	}
}
