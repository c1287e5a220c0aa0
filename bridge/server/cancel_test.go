package server

import (
	"net/http"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// TestCancelSession_Exact holds POST /v1/sessions/:id/cancel to the
// TypeScript bridge's: only an exact, digest-bound cancellation of a turn
// of the session is taken (400 otherwise, `{}` included), so a caller
// holding a stale reference never cancels a later turn; the answer is an
// acknowledgement stored per operation id.
func TestCancelSession_Exact(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	createSession(t, v, "s2", "")
	postTurn(t, v, "s1", turnBody("t1", "r1", "hello"))
	waitRun(t, v, "r1")
	stale := runRef(t, v, "r1")
	postTurn(t, v, "s1", turnBody("t2", "r2", "slow:100:100")) // live through the cases below
	live := runRef(t, v, "r2")
	withRef := func(op string, mod func(*wire.RunRef)) string {
		ref := live
		mod(&ref)
		return exactCancelBody(t, op, ref, "")
	}
	badDigest := `{"operationId":"op-x","run":{"runId":"r2","provider":"test","environmentId":"env-1","sessionId":"s1",` +
		`"executionId":"exec-t2","requestDigest":"` + live.RequestDigest + `"},"requestDigest":"sha256:` +
		"0000000000000000000000000000000000000000000000000000000000000000" + `"}`
	for _, tc := range []struct {
		name    string
		session string
		body    string
		status  int
		typ     string // error type of a refusal; "" for an acknowledgement
		ack     string // acknowledgement status
		effect  string
	}{
		{"an empty object", "s1", `{}`, 400, wire.TypeInvalidRequest, "", ""},
		{"no body", "s1", ``, 400, wire.TypeInvalidRequest, "", ""},
		{"a run id alone", "s1", `{"run_id":"r2"}`, 400, wire.TypeInvalidRequest, "", ""},
		{"a wrong request digest", "s1", badDigest, 400, wire.TypeInvalidRequest, "", ""},
		{"without the run's request digest", "s1", withRef("op-nodigest", func(r *wire.RunRef) { r.RequestDigest = "" }),
			400, wire.TypeInvalidRequest, "", ""},
		{"the run under another session's path", "s2", withRef("op-other-session", func(*wire.RunRef) {}),
			409, "", wire.CancelConflict, wire.EffectUnknown},
		{"another execution id", "s1", withRef("op-other-exec", func(r *wire.RunRef) { r.ExecutionID = "exec-t1" }),
			409, "", wire.CancelConflict, wire.EffectUnknown},
		{"another request digest", "s1", withRef("op-other-digest", func(r *wire.RunRef) { r.RequestDigest = stale.RequestDigest }),
			409, "", wire.CancelConflict, wire.EffectUnknown},
		{"an unknown run", "s1", withRef("op-unknown", func(r *wire.RunRef) { r.RunID = "r9" }), 409, "", wire.CancelConflict, wire.EffectUnknown},
		{"the stale reference of the ended turn", "s1", exactCancelBody(t, "op-stale", stale, ""),
			200, "", wire.CancelAccepted, wire.EffectNotLive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := v.do(t, "POST", "/v1/sessions/"+tc.session+"/cancel", tc.body)
			if tc.typ != "" {
				if e := decode[wire.ErrorResponse](t, resp).Error; resp.StatusCode != tc.status || e.Type != tc.typ {
					t.Errorf("cancel with %s = %d %+v, want %d %s", tc.body, resp.StatusCode, e, tc.status, tc.typ)
				}
			} else if a := decode[wire.CancellationAck](t, resp); resp.StatusCode != tc.status || a.Status != tc.ack || a.Effect != tc.effect {
				t.Errorf("cancel with %s = %d %+v, want %d %s/%s", tc.body, resp.StatusCode, a, tc.status, tc.ack, tc.effect)
			}
			if s := decode[wire.RunSnapshot](t, v.do(t, "GET", "/v1/runs/r2", "")); s.Terminal {
				t.Fatalf("the live turn ended after %s: %+v", tc.name, s)
			}
		})
	}

	body := exactCancelBody(t, "op-live", live, "done with it")
	resp := v.do(t, "POST", "/v1/sessions/s1/cancel?wait_ms=10000", body)
	first := decode[wire.CancellationAck](t, resp)
	if resp.StatusCode != http.StatusOK || first.Status != wire.CancelAccepted || first.Effect != wire.EffectCancelled ||
		first.Run != live || first.OperationID != "op-live" || resp.Header.Get(wire.HeaderRunStatus) != wire.StatusCancelled {
		t.Fatalf("exact cancel of the live turn = %d %+v", resp.StatusCode, first)
	}
	if s := waitRun(t, v, "r2"); s.Status != wire.StatusCancelled {
		t.Errorf("run r2 after its exact cancellation = %+v, want cancelled", s)
	}
	t.Run("the operation repeated gets its acknowledgement as it was", func(t *testing.T) {
		resp := v.do(t, "POST", "/v1/sessions/s1/cancel", body)
		if again := decode[wire.CancellationAck](t, resp); resp.StatusCode != http.StatusOK || again != first {
			t.Errorf("repeat = %d %+v, want %+v", resp.StatusCode, again, first)
		}
	})
	t.Run("the operation id for another request is a conflict", func(t *testing.T) {
		resp := v.do(t, "POST", "/v1/sessions/s1/cancel", exactCancelBody(t, "op-live", live, "another reason"))
		if a := decode[wire.CancellationAck](t, resp); resp.StatusCode != http.StatusConflict || a.Status != wire.CancelConflict ||
			a.ExistingRequestDigest != first.RequestDigest {
			t.Errorf("reuse = %d %+v, want 409 conflict naming %s", resp.StatusCode, a, first.RequestDigest)
		}
	})
}
