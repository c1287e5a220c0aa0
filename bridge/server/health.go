package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// healthCache probes backends with `<bin> --version` and keeps ready
// verdicts for a while; other verdicts are never reused.
//
// A probe runs on its own, bounded by ProbeTimeout alone: a caller that
// stops waiting (a health check whose client timed out) leaves it running,
// and the next caller joins it. Were a probe bound to its request, a
// harness slower to start than the clients' timeout (Gemini CLI on a loaded
// box) would be killed at every poll and never reported ready. A ready
// verdict older than HealthTTL is still answered (cached, with the time it
// was probed) while the probe that refreshes it runs, so a turn or an
// idle-clock read never waits on a refresh of a harness that was ready;
// force waits for a fresh verdict.
type healthCache struct {
	opts     Options
	mu       sync.Mutex
	last     map[*engine.Backend]wire.BackendHealth
	at       map[*engine.Backend]time.Time
	inflight map[*engine.Backend]*probeCall
}

// probeCall is one probe under way; res is set when done is closed.
type probeCall struct {
	done chan struct{}
	res  wire.BackendHealth
}

func newHealthCache(opts Options) *healthCache {
	if opts.ProbeEnv == nil {
		for _, k := range []string{"PATH", "HOME"} {
			if v, ok := os.LookupEnv(k); ok {
				opts.ProbeEnv = append(opts.ProbeEnv, k+"="+v)
			}
		}
	}
	return &healthCache{opts: opts, last: map[*engine.Backend]wire.BackendHealth{}, at: map[*engine.Backend]time.Time{},
		inflight: map[*engine.Backend]*probeCall{}}
}

// probe returns b's verdict. Unless force: a ready one younger than
// HealthTTL; else, while a probe refreshes it, the last ready one.
// Otherwise that of a probe, started or joined. A caller whose ctx ends
// first gets an error verdict; the probe goes on.
func (h *healthCache) probe(ctx context.Context, b *engine.Backend, force bool) wire.BackendHealth {
	h.mu.Lock()
	last, ok := h.last[b]
	age := time.Since(h.at[b])
	if ok && !force && last.State == wire.BackendReady && age < h.opts.HealthTTL {
		h.mu.Unlock()
		last.Cached = true
		return last
	}
	call := h.inflight[b]
	if call == nil {
		call = &probeCall{done: make(chan struct{})}
		h.inflight[b] = call
		go h.run(context.WithoutCancel(ctx), b, call)
	}
	h.mu.Unlock()
	if ok && !force && last.State == wire.BackendReady {
		last.Cached = true
		return last
	}
	select {
	case <-call.done:
		return call.res
	case <-ctx.Done():
		return wire.BackendHealth{Name: b.Adapter.Name(), State: wire.BackendError, ProbedAt: time.Now().UnixMilli(),
			Detail: fmt.Sprintf("%s --version still running when the request ended: %v", b.Bin, context.Cause(ctx))}
	}
}

// run probes b once, within ProbeTimeout, and records the verdict.
func (h *healthCache) run(ctx context.Context, b *engine.Backend, call *probeCall) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.ProbeTimeout)
	defer cancel()
	res := wire.BackendHealth{Name: b.Adapter.Name(), ProbedAt: time.Now().UnixMilli()}
	cmd := exec.CommandContext(ctx, b.Bin, "--version")
	cmd.Env = h.opts.ProbeEnv
	if v, ok := b.Adapter.(harness.VersionEnv); ok {
		cmd.Env = append(slices.Clone(cmd.Env), v.VersionEnv()...)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		res.State, res.Version = wire.BackendReady, strings.TrimSpace(out.String())
		if res.Version == "" {
			// Some releases (Pi 0.73) print their version on stderr.
			res.Version = firstLine(errOut.String())
		}
		res.Detail = b.Bin + " --version exited 0"
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		res.State = wire.BackendError
		res.Detail = fmt.Sprintf("%s --version: %v: %s", b.Bin, err, firstLine(errOut.String()))
	case ctx.Err() != nil:
		res.State = wire.BackendError
		res.Detail = fmt.Sprintf("%s --version did not answer within %s", b.Bin, h.opts.ProbeTimeout)
	default:
		res.State = wire.BackendUnavailable
		res.Detail = fmt.Sprintf("cannot start %s: %v", b.Bin, err)
	}
	h.mu.Lock()
	h.last[b], h.at[b] = res, time.Now()
	delete(h.inflight, b)
	call.res = res
	h.mu.Unlock()
	close(call.done)
}

// ProbeBackends probes every backend as GET /health does, so that a
// /health right after the start answers from the probe already under way.
func (s *Server) ProbeBackends(ctx context.Context) {
	for _, b := range s.opts.Backends {
		s.health.probe(ctx, b, false)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	res, status := s.health.report(r.Context(), s.opts.Backends, r.URL.Query().Get("force") == "1", "ok")
	select {
	case <-s.opts.Engine.Ready(): // the previous incarnation's runs are ended
		res.Idle = s.idle(r.Context())
	default:
	}
	writeJSON(w, status, res)
}

// report is GET /health of backends: status ok (a pooled bridge's
// standby) and 200 when every backend is ready, degraded and 503
// otherwise.
func (h *healthCache) report(ctx context.Context, backends []*engine.Backend, force bool, ok string) (wire.Health, int) {
	res := wire.Health{Status: ok, Backends: []wire.BackendHealth{}}
	for _, b := range backends {
		bh := h.probe(ctx, b, force)
		if bh.State != wire.BackendReady {
			res.Status = "degraded"
		}
		res.Backends = append(res.Backends, bh)
	}
	if len(backends) == 0 {
		res.Status = "degraded"
	}
	if res.Status != ok {
		return res, http.StatusServiceUnavailable
	}
	return res, http.StatusOK
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	list := wire.ModelList{Object: "list", Data: []wire.Model{}}
	for _, b := range s.opts.Backends {
		if s.health.probe(r.Context(), b, false).State != wire.BackendReady {
			continue
		}
		for _, m := range b.Adapter.Models() {
			list.Data = append(list.Data, wire.Model{ID: b.Adapter.Name() + "/" + m, Object: "model", OwnedBy: b.Adapter.Name()})
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	names := []string{}
	for _, b := range s.opts.Backends {
		names = append(names, b.Adapter.Name())
	}
	writeJSON(w, http.StatusOK, wire.Root{
		Name: "box-bridge", Version: s.opts.Version, Scheme: "bridge/<harness>/<model>",
		Capabilities: map[string]any{"streaming": true, "replay": true, "detach": true, "cancel": true,
			"durable": true, "exactCancellation": true,
			// Portable context plans and transfers (POST /v1/context/...) and
			// workspace checkpoints and forks (POST /v1/workspace/...).
			"contextTransfer": true, "workspaceBranching": s.opts.DataDir != "",
			// Exact process environments (POST /v1/exact/environments).
			"exactProcess": s.opts.Engine.ExecutionCaps(r.Context()).Jail.Unavailable == "",
			// What the bridge does with a turn's execution object (wire.ExecutionCaps).
			"execution": s.opts.Engine.ExecutionCaps(r.Context())},
		Backends: names, Endpoints: endpoints,
	})
}
