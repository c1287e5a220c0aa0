package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// healthWait waits until the bridge's /health reports one backend ready:
// a GET each poll, under its own timeout, ending early when exited
// delivers (the bridge process ended).
type healthWait struct {
	URL      string
	Client   *http.Client
	Backend  string
	Timeout  time.Duration
	Interval time.Duration
}

// WaitUntilReady polls until ready and returns the backend's health.
func (w healthWait) WaitUntilReady(ctx context.Context, exited <-chan error) (wire.BackendHealth, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, w.Timeout, errNotReadyInTime)
	defer cancel()
	interval := w.Interval
	if interval == 0 {
		interval = 50 * time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last wire.BackendHealth
	var probeErr string
	for {
		h, err := w.probe(ctx)
		var crash *BridgeCrashLoopError
		if errors.As(err, &crash) {
			return h, err
		}
		if err != nil && ctx.Err() == nil {
			probeErr = err.Error()
		}
		if err == nil {
			last, probeErr = h, ""
			if h.State == wire.BackendReady {
				return h, nil
			}
		}
		select {
		case err := <-exited:
			return last, err
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errNotReadyInTime) {
				return last, &NotReadyError{Backend: w.Backend, Timeout: w.Timeout, Last: last.State, Detail: last.Detail, Probe: probeErr}
			}
			return last, context.Cause(ctx)
		case <-tick.C:
		}
	}
}

var errNotReadyInTime = errors.New("bridge not ready in time")

func (w healthWait) probe(ctx context.Context) (wire.BackendHealth, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.URL+"/health", nil)
	if err != nil {
		return wire.BackendHealth{}, err
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		return wire.BackendHealth{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return wire.BackendHealth{}, err
	}
	var h wire.Health
	if err := json.Unmarshal(body, &h); err != nil {
		return wire.BackendHealth{}, fmt.Errorf("GET /health: %d %.200s", resp.StatusCode, body)
	}
	for _, b := range h.Backends {
		if b.Name == w.Backend && h.Status == wire.HealthCrashLoop {
			return b, &BridgeCrashLoopError{Detail: b.Detail}
		}
		if b.Name == w.Backend {
			return b, nil
		}
	}
	return wire.BackendHealth{}, fmt.Errorf("GET /health names no backend %s", w.Backend)
}
