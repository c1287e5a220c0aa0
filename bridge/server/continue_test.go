package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// nativeClaude is the Claude Code adapter declared to take native
// continuations, so that the route can be tested with the scripted CLI.
type nativeClaude struct{ claude.Adapter }

func (nativeClaude) ContinuesNatively() bool { return true }

// newNativeEnv is newEnv with nativeClaude as its one backend.
func newNativeEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "data"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := engine.New(context.Background(), st, engine.Options{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
	})
	s, err := New(Options{Engine: e, Bearer: bearer, Version: "test",
		Backends: []*engine.Backend{{Adapter: nativeClaude{}, Bin: bridgetest.FakeClaude(t)}}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(checked(t, s))
	t.Cleanup(ts.Close)
	return &env{url: ts.URL, e: e, dir: dir}
}

// continueRequest builds a digest-bound continuation body of run at boundary.
func continueRequest(t *testing.T, op string, run wire.RunRef, boundary wire.BoundaryProof, prompt string) (wire.ContinuationRequest, string) {
	t.Helper()
	turn := wire.ContinuationTurn{Prompt: prompt}
	td, err := wire.Digest(turn)
	if err != nil {
		t.Fatal(err)
	}
	req := wire.ContinuationRequest{OperationID: op, TurnDigest: td, Run: run, ExpectedBoundary: boundary}
	if req.RequestDigest, err = wire.Digest(map[string]any{"turnDigest": td, "operationId": op, "run": run, "expectedBoundary": boundary}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(wire.ContinueBody{Request: req, Turn: turn})
	return req, string(b)
}

func postContinue(t *testing.T, v *env, session, body string) (int, wire.ContinuationOutcome) {
	t.Helper()
	resp := v.do(t, "POST", "/v1/sessions/"+session+"/continue", body)
	return resp.StatusCode, decode[wire.ContinuationOutcome](t, resp)
}

// firstTurn runs turn t1 of a new session and returns its run and the
// session's boundary after it.
func firstTurn(t *testing.T, v *env, session string) (wire.RunRef, wire.BoundaryProof) {
	t.Helper()
	createSession(t, v, session, "")
	adm := postTurn(t, v, session, turnBody("t1", session+"-r1", "hello"))
	waitRun(t, v, adm.Run.ID)
	if adm.Session.ContextBoundary == nil {
		t.Fatal("admission without a context boundary")
	}
	r := adm.Run
	return wire.RunRef{RunID: r.ID, Provider: r.Provider, EnvironmentID: r.EnvironmentID, SessionID: r.SessionID,
		ExecutionID: r.ExecutionID, RequestDigest: r.RequestDigest}, *adm.Session.ContextBoundary
}

func TestContinue(t *testing.T) {
	v := newNativeEnv(t)
	run, boundary := firstTurn(t, v, "s1")

	req, body := continueRequest(t, "cont-1", run, boundary, "hello")
	code, out := postContinue(t, v, "s1", body)
	ack := out.Acknowledgement
	if code != 200 || ack.Status != wire.ContinuationAccepted || ack.OperationID != "cont-1" || ack.RequestDigest != req.RequestDigest ||
		out.Result == nil || !out.Result.Success || out.Result.Text != "Hello, world" || out.Result.Usage == nil || out.ControlRef == nil {
		t.Fatalf("continue = %d %+v result %+v", code, out, out.Result)
	}
	// The agent interface refuses an accepted continuation without the
	// boundary observed at admission, proven for the continued run.
	if a := ack.ActualBoundary; a == nil || a.RunID != run.RunID || a.RequestDigest != run.RequestDigest ||
		!reflect.DeepEqual(a.Boundary, boundary.Boundary) || a.ObservedAt < boundary.ObservedAt {
		t.Errorf("actual boundary = %+v, want %+v of run %s", a, boundary.Boundary, run.RunID)
	}
	if md := out.Result.Metadata; md["runId"] != "cont-1" || md["executionId"] != "cont-1" || md["status"] != wire.StatusDone ||
		md["requestDigest"] != out.ControlRef.RequestDigest || len(out.Result.Events) == 0 {
		t.Errorf("result metadata %v with %d events, want the run's identity and its events", md, len(out.Result.Events))
	}
	next := *out.ControlRef
	if next.RunID != "cont-1" || next.ExecutionID != "cont-1" || next.SessionID != "s1" || next.Provider != run.Provider ||
		next.EnvironmentID != run.EnvironmentID {
		t.Errorf("control ref = %+v, want run cont-1 of the same session, provider and environment", next)
	}
	view := decode[wire.SessionView](t, v.do(t, "GET", "/v1/sessions/s1", ""))
	if b := view.ContextBoundary; b == nil || b.RunID != "cont-1" || b.Boundary.Revision != "2" || b.RequestDigest != next.RequestDigest {
		t.Errorf("boundary after the continuation = %+v, want revision 2 of run cont-1", b)
	}

	if view.Turns != 2 || view.RunID == nil || *view.RunID != "cont-1" || view.Status != wire.SessionIdle || view.Run == nil ||
		view.Run.ID != "cont-1" || view.Backend != "claude-code" || view.Object != wire.SessionObject {
		t.Errorf("view after the continuation = turns %d run_id %v status %q run %+v backend %q, want 2 completed turns, run cont-1, idle",
			view.Turns, view.RunID, view.Status, view.Run, view.Backend)
	}

	t.Run("the same request repeated is replayed with the same outcome", func(t *testing.T) {
		code2, again := postContinue(t, v, "s1", body)
		want := out.Acknowledgement
		want.Status = wire.ContinuationReplayed
		if code2 != code || !reflect.DeepEqual(again.Acknowledgement, want) || *again.ControlRef != next ||
			!reflect.DeepEqual(again.Result, out.Result) {
			t.Errorf("repeat = %d %+v, want %d %+v", code2, again, code, want)
		}
	})
	t.Run("the same operation for another request is a conflict", func(t *testing.T) {
		_, other := continueRequest(t, "cont-1", run, boundary, "something else")
		code, o := postContinue(t, v, "s1", other)
		if code != 409 || o.Acknowledgement.Status != wire.ContinuationConflict || o.Acknowledgement.ExistingRequestDigest != req.RequestDigest {
			t.Errorf("conflict = %d %+v", code, o.Acknowledgement)
		}
	})
	t.Run("a boundary of a run the session left is a recorded conflict", func(t *testing.T) {
		staleReq, stale := continueRequest(t, "cont-2", run, boundary, "hello")
		for range 2 {
			code, o := postContinue(t, v, "s1", stale)
			a := o.Acknowledgement
			if code != 409 || a.Status != wire.ContinuationConflict || o.ControlRef != nil || a.ActualBoundary != nil ||
				a.ExistingRequestDigest == "" || a.ExistingRequestDigest == staleReq.RequestDigest {
				t.Errorf("stale = %d %+v", code, o)
			}
		}
	})
	t.Run("a boundary of the right run with another revision names the actual one", func(t *testing.T) {
		nb := *view.ContextBoundary
		wrong := nb
		wrong.Boundary.Revision = "7"
		_, b := continueRequest(t, "cont-3", next, wrong, "hello")
		code, o := postContinue(t, v, "s1", b)
		if a := o.Acknowledgement.ActualBoundary; code != 409 || o.Acknowledgement.Status != wire.ContinuationBoundaryMismatch ||
			a == nil || a.Boundary.Revision != "2" {
			t.Errorf("wrong revision = %d %+v", code, o.Acknowledgement)
		}
	})
	t.Run("unverifiable requests", func(t *testing.T) {
		_, good := continueRequest(t, "cont-4", next, *view.ContextBoundary, "hello")
		var tampered wire.ContinueBody
		json.Unmarshal([]byte(good), &tampered)
		tampered.Turn.Prompt = "tampered"
		foreign := *view.ContextBoundary
		foreign.RunID = "other-run"
		_, foreignBody := continueRequest(t, "cont-5", next, foreign, "hello")
		for name, b := range map[string]string{"turn digest": string(wire.MustJSON(tampered)), "boundary of another run": foreignBody} {
			code, o := postContinue(t, v, "s1", b)
			if code != 422 || o.Acknowledgement.Status != wire.ContinuationUnverified {
				t.Errorf("%s = %d %+v, want 422 unverified", name, code, o.Acknowledgement)
			}
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		_, b := continueRequest(t, "cont-6", next, *view.ContextBoundary, "hello")
		if code, o := postContinue(t, v, "nope", b); code != 404 || o.Acknowledgement.Status != wire.ContinuationUnknownSession {
			t.Errorf("unknown session = %d %+v", code, o.Acknowledgement)
		}
	})
}

// TestContinue_atomicBoundary races continuations of one boundary under
// different operation ids: exactly one is admitted.
func TestContinue_atomicBoundary(t *testing.T) {
	v := newNativeEnv(t)
	run, boundary := firstTurn(t, v, "s1")
	const n = 6
	var wg sync.WaitGroup
	statuses := make([]string, n)
	for i := range n {
		_, b := continueRequest(t, "race-"+string(rune('a'+i)), run, boundary, "slow:2:50")
		req := mustRequest(t, v, b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var o wire.ContinuationOutcome
			json.NewDecoder(resp.Body).Decode(&o)
			statuses[i] = o.Acknowledgement.Status
		}()
	}
	wg.Wait()
	accepted := 0
	for _, s := range statuses {
		switch s {
		case wire.ContinuationAccepted:
			accepted++
		case wire.ContinuationBoundaryMismatch, wire.ContinuationConflict:
		default:
			t.Errorf("status %q, want accepted, boundary_mismatch or conflict", s)
		}
	}
	turns, err := v.e.Store().Turns(t.Context(), "s1", 0)
	if accepted != 1 || err != nil || len(turns) != 2 {
		t.Errorf("accepted %d of %v with %d turns (%v), want exactly one continuation admitted", accepted, statuses, len(turns), err)
	}
}

func mustRequest(t *testing.T, v *env, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", v.url+"/v1/sessions/s1/continue", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	return req
}
