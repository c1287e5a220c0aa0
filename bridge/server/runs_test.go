package server

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

// openStream starts a streaming chat and returns once the headers and the
// `: connected` comment arrived; cancel detaches the reader.
func openStream(t *testing.T, v *env, body string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", v.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("POST stream = %d", resp.StatusCode)
	}
	return resp, cancel
}

func TestSaturation(t *testing.T) {
	v := newEnv(t, config{engine: engine.Options{MaxRuns: 1}})
	openStream(t, v, chatBody("a", "stall", true))
	resp := v.do(t, "POST", "/v1/chat/completions", chatBody("b", "hello", true))
	e := decode[wire.ErrorResponse](t, resp)
	if resp.StatusCode != 429 || e.Error.Type != wire.TypeExecutorSaturated || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the limit = %d %+v Retry-After %q", resp.StatusCode, e.Error, resp.Header.Get("Retry-After"))
	}
}

func TestCancel(t *testing.T) {
	v := newEnv(t, config{engine: engine.Options{KillGrace: 200 * time.Millisecond}})
	resp, detach := openStream(t, v, chatBody("c1", "stubborn", true))
	digest := resp.Header.Get(wire.HeaderRunRequestDigest)
	detach() // a detached run keeps running
	// The run is read once the server let go of the detached stream: a
	// detach that ended the run would have ended it by then.
	polltest.Until(t, 10*time.Second, "the server to let go of the detached stream", func() bool { return v.srv.idle(t.Context()).Streams == 0 })
	snap := decode[wire.RunSnapshot](t, v.do(t, "GET", "/v1/runs/c1", ""))
	if snap.Terminal || snap.Status != wire.StatusRunning {
		t.Fatalf("after detach: %+v, want still running", snap)
	}
	cr := v.do(t, "POST", "/v1/runs/c1/cancel", "")
	got := decode[wire.CancelResponse](t, cr)
	if cr.StatusCode != 200 || !got.Cancelled || !got.CancelRequested || !got.Terminal || got.Run.Status != wire.StatusCancelled {
		t.Errorf("cancel = %d %+v", cr.StatusCode, got)
	}
	if cr.Header.Get(wire.HeaderRunRequestDigest) != digest {
		t.Errorf("cancel digest header = %q, want %q", cr.Header.Get(wire.HeaderRunRequestDigest), digest)
	}

	t.Run("ended run is not live", func(t *testing.T) {
		done := v.do(t, "POST", "/v1/chat/completions", chatBody("c3", "hello", false))
		body := exactCancelBody(t, "op-c3", headerRef(done.Header), "")
		r := v.do(t, "POST", "/v1/runs/c3/cancel", body)
		if a := decode[wire.CancellationAck](t, r); r.StatusCode != 200 || a.Effect != wire.EffectNotLive {
			t.Errorf("cancel of a done run = %d %+v, want not_live", r.StatusCode, a)
		}
		plain := decode[wire.CancelResponse](t, v.do(t, "POST", "/v1/runs/c3/cancel", ""))
		if plain.Cancelled || plain.CancelRequested || !plain.Terminal {
			t.Errorf("plain cancel of a done run = %+v", plain)
		}
	})
	t.Run("exact", func(t *testing.T) {
		resp, _ := openStream(t, v, chatBody("c2", "stall", true, `"provider":"p","environment_id":"e","execution_id":"x","session_id":"s"`))
		ref := wire.RunRef{RunID: "c2", Provider: "p", EnvironmentID: "e", SessionID: "s", ExecutionID: "x",
			RequestDigest: resp.Header.Get(wire.HeaderRunRequestDigest)}
		body := func(op, reason string) string { return exactCancelBody(t, op, ref, reason) }
		r1 := v.do(t, "POST", "/v1/runs/c2/cancel", body("op-1", "stop"))
		a1 := decode[wire.CancellationAck](t, r1)
		if r1.StatusCode != 200 || a1.Status != wire.CancelAccepted || a1.Effect != wire.EffectCancelled {
			t.Errorf("exact cancel = %d %+v", r1.StatusCode, a1)
		}
		r2 := v.do(t, "POST", "/v1/runs/c2/cancel", body("op-1", "stop"))
		a2 := decode[wire.CancellationAck](t, r2)
		if r2.StatusCode != 200 || a2.Status != wire.CancelReplayed || a2.Effect != wire.EffectCancelled {
			t.Errorf("repeated operation = %d %+v", r2.StatusCode, a2)
		}
		r3 := v.do(t, "POST", "/v1/runs/c2/cancel", body("op-1", "other reason"))
		a3 := decode[wire.CancellationAck](t, r3)
		if r3.StatusCode != 409 || a3.Status != wire.CancelConflict || a3.ExistingRequestDigest != a1.RequestDigest {
			t.Errorf("reused operation id = %d %+v", r3.StatusCode, a3)
		}
		r4 := v.do(t, "POST", "/v1/runs/c2/cancel", body("op-2", "stop"))
		if a4 := decode[wire.CancellationAck](t, r4); a4.Status != wire.CancelAccepted || a4.Effect != wire.EffectCancelled {
			t.Errorf("second operation on a cancelled run = %+v, want accepted/cancelled", a4)
		}
		ghost := ref
		ghost.RunID = "ghost"
		r5 := v.do(t, "POST", "/v1/runs/ghost/cancel", exactCancelBody(t, "op-3", ghost, "x"))
		if a5 := decode[wire.CancellationAck](t, r5); r5.StatusCode != 200 || a5.Status != wire.CancelUnknown {
			t.Errorf("cancel of an unknown run = %d %+v", r5.StatusCode, a5)
		}
		wrong := ref
		wrong.Provider = "q"
		r6 := v.do(t, "POST", "/v1/runs/c2/cancel", exactCancelBody(t, "op-4", wrong, "x"))
		if e := decode[wire.ErrorResponse](t, r6); r6.StatusCode != 409 || e.Error.Type != wire.TypeRunIdentityConflict {
			t.Errorf("cancel with a wrong identity = %d %+v", r6.StatusCode, e.Error)
		}
	})
}

// headerRef is the exact run reference of a response's X-Run-* headers.
func headerRef(h http.Header) wire.RunRef {
	return wire.RunRef{RunID: h.Get(wire.HeaderRunID), Provider: h.Get(wire.HeaderRunProvider),
		EnvironmentID: h.Get(wire.HeaderRunEnvironmentID), SessionID: h.Get(wire.HeaderRunSessionID),
		ExecutionID: h.Get(wire.HeaderRunExecutionID), RequestDigest: h.Get(wire.HeaderRunRequestDigest)}
}

// exactCancelBody is the body of an exact cancellation of ref, with its
// request digest.
func exactCancelBody(t *testing.T, op string, ref wire.RunRef, reason string) string {
	t.Helper()
	req := wire.CancellationRequest{OperationID: op, Run: ref, Reason: reason}
	d, err := wire.CancellationDigest(req)
	if err != nil {
		t.Fatal(err)
	}
	req.RequestDigest = d
	return string(wire.MustJSON(req))
}

func TestReaders(t *testing.T) {
	v := newEnv(t, config{server: Options{Keepalive: 100 * time.Millisecond}})
	resp, _ := openStream(t, v, chatBody("m", "slow:20:30", true))
	var wg sync.WaitGroup
	results := make([]sse, 3)
	wg.Add(2)
	for i := 1; i <= 2; i++ {
		go func() {
			defer wg.Done()
			r := v.do(t, "GET", "/v1/runs/m/events", "")
			results[i] = readSSE(t, r.Body)
		}()
	}
	// A reader that leaves early detaches only itself.
	early := v.do(t, "GET", "/v1/runs/m/events", "")
	br := bufio.NewReader(early.Body)
	br.ReadString('\n')
	early.Body.Close()
	results[0] = readSSE(t, resp.Body)
	wg.Wait()
	for i, r := range results {
		if !r.done || len(r.frames) != 21 {
			t.Fatalf("reader %d: %d frames done %v, want 21 and [DONE]", i, len(r.frames), r.done)
		}
		if i > 0 {
			if diff := cmp.Diff(results[0].frames, r.frames, cmp.AllowUnexported(frame{})); diff != "" {
				t.Errorf("reader %d differs (-want +got):\n%s", i, diff)
			}
		}
	}

	t.Run("keepalive", func(t *testing.T) {
		resp, _ := openStream(t, v, chatBody("k", "stall", true))
		br := bufio.NewReader(resp.Body)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == ": keepalive\n" {
				return
			}
		}
		t.Error("no keepalive comment on an idle stream")
	})
}

// TestReaders_DifferentCursors attaches three readers to a live run at
// once, from cursors 0, 5 and 12: each sees the same events, in the same
// order, from its own cursor to the end.
func TestReaders_DifferentCursors(t *testing.T) {
	v := newEnv(t, config{})
	openStream(t, v, chatBody("three", "slow:40:15", true))
	var attachedAt int64
	polltest.UntilNil(t, 10*time.Second, "the run to reach event 12", func() error {
		snap := decode[wire.RunSnapshot](t, v.do(t, "GET", "/v1/runs/three", ""))
		if snap.Terminal {
			t.Fatalf("run ended before the readers attached: %+v", snap)
		}
		if snap.LastSeq < 12 {
			return fmt.Errorf("run reached only event %d", snap.LastSeq)
		}
		attachedAt = snap.LastSeq
		return nil
	})
	cursors := []int64{0, 5, 12}
	results := make([]sse, len(cursors))
	errs := make([]error, len(cursors))
	var wg sync.WaitGroup
	for i, c := range cursors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", v.url+"/v1/runs/three/events", nil)
			req.Header.Set("Authorization", "Bearer "+bearer)
			req.Header.Set(wire.HeaderLastEventID, strconv.FormatInt(c, 10))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				errs[i] = fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			results[i] = readSSE(t, resp.Body)
		}()
	}
	wg.Wait()
	all := readSSE(t, v.do(t, "GET", "/v1/runs/three/events", "").Body)
	if len(all.frames) != 41 || !all.done {
		t.Fatalf("full replay: %d frames, done %v, want 41 and [DONE]", len(all.frames), all.done)
	}
	for i, c := range cursors {
		if errs[i] != nil {
			t.Fatalf("reader from %d: %v", c, errs[i])
		}
		r := results[i]
		if !r.done {
			t.Errorf("reader from %d: no [DONE]", c)
		}
		if diff := cmp.Diff(all.frames[c:], r.frames, cmp.AllowUnexported(frame{})); diff != "" {
			t.Errorf("reader from %d (-want +got):\n%s", c, diff)
		}
	}
	if attachedAt >= 41 {
		t.Errorf("readers attached at event %d: they saw no live event", attachedAt)
	}
}

// TestAuth: with a bearer set, every route but GET /health answers 401
// invalid_authentication_error without it; /health stays open.
func TestAuth(t *testing.T) {
	v := newEnv(t, config{})
	routes := []struct{ method, path, body string }{
		{"GET", "/", ""}, {"GET", "/v1/models", ""}, {"GET", "/v1/capabilities?model=claude-code", ""},
		{"POST", "/v1/chat/completions", chatBody("auth-1", "hello", true)},
		{"GET", "/v1/runs/auth-1", ""}, {"GET", "/v1/runs/auth-1/events", ""}, {"POST", "/v1/runs/auth-1/cancel", ""},
		{"GET", "/v2/unknown", ""},
	}
	for _, rt := range routes {
		for _, auth := range []string{"", "Bearer ", "Basic " + bearer, "Bearer " + bearer + "x"} {
			t.Run(rt.method+" "+rt.path+" "+auth, func(t *testing.T) {
				hdr := []string{"Authorization", auth}
				resp := v.do(t, rt.method, rt.path, rt.body, hdr...)
				e := decode[wire.ErrorResponse](t, resp)
				if resp.StatusCode != 401 || e.Error.Type != wire.TypeInvalidAuthentication || e.Error.Status != 401 {
					t.Errorf("%s %s with Authorization %q = %d %+v, want 401 %s", rt.method, rt.path, auth, resp.StatusCode, e.Error, wire.TypeInvalidAuthentication)
				}
			})
		}
	}
	resp := v.do(t, "GET", "/health", "", "Authorization", "")
	if h := decode[wire.Health](t, resp); resp.StatusCode != 200 || h.Status != "ok" {
		t.Errorf("GET /health without a bearer = %d %+v, want 200 ok", resp.StatusCode, h)
	}
	if _, err := v.e.Store().GetRun(t.Context(), "auth-1"); err == nil {
		t.Error("an unauthenticated chat request started a run")
	}
}
