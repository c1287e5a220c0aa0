package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/goldentest"
)

// exchanges records request/response pairs as stable text: the request
// line and body, the status, the X-Run-* headers and the body, JSON
// indented with times and other values that change between runs replaced
// by placeholders.
type exchanges struct {
	t   *testing.T
	v   *env
	buf bytes.Buffer
}

// volatile are the JSON keys whose values change from run to run.
var volatile = map[string]bool{"startedAt": true, "endedAt": true, "expiresAt": true, "identityExpiresAt": true,
	"lifetimeExpiresAt": true, "observedAt": true, "receivedAt": true, "occurredAt": true, "created": true,
	"cancelRequestedAt": true, "probed_at": true}

func scrub(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if volatile[k] && e != nil {
				x[k] = "<" + k + ">"
				continue
			}
			x[k] = scrub(e)
		}
	case []any:
		for i, e := range x {
			x[i] = scrub(e)
		}
	}
	return v
}

// pretty is raw JSON indented and scrubbed, or raw itself when it is not
// JSON.
func pretty(raw []byte) string {
	var v any
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(scrub(v))
	return strings.TrimRight(b.String(), "\n")
}

// compactJSON is v scrubbed, as one line of JSON.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(scrub(v))
	return strings.TrimRight(b.String(), "\n")
}

// prettySSE renders an event stream frame by frame, each data line's JSON
// scrubbed and compact.
func prettySSE(raw []byte) string {
	var out strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var v any
			if json.Unmarshal([]byte(d), &v) == nil {
				line = "data: " + compactJSON(v)
			}
		}
		out.WriteString(line + "\n")
	}
	return strings.TrimRight(out.String(), "\n")
}

// do sends a request and records it; filter, when set, picks what of the
// response body is recorded.
func (x *exchanges) do(title, method, path, body string, hdr []string, filter func(map[string]any) map[string]any) (int, []byte) {
	x.t.Helper()
	resp := x.v.do(x.t, method, path, body, hdr...)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		x.t.Fatal(err)
	}
	fmt.Fprintf(&x.buf, "### %s\n%s %s\n", title, method, path)
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&x.buf, "%s: %s\n", hdr[i], hdr[i+1])
	}
	if body != "" {
		x.buf.WriteString(pretty([]byte(body)) + "\n")
	}
	fmt.Fprintf(&x.buf, "--- %d\n", resp.StatusCode)
	var names []string
	for name := range resp.Header {
		if strings.HasPrefix(name, "X-Run-") || name == "Retry-After" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&x.buf, "%s: %s\n", name, resp.Header.Get(name))
	}
	shown := data
	if filter != nil {
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			shown, _ = json.Marshal(filter(m))
		}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		x.buf.WriteString(prettySSE(shown) + "\n\n")
	} else {
		x.buf.WriteString(pretty(shown) + "\n\n")
	}
	return resp.StatusCode, data
}

// check compares the record with testdata/tscompat/name.golden, or
// rewrites it with -update.
func (x *exchanges) check(name string) {
	x.t.Helper()
	goldentest.Check(x.t, filepath.Join("testdata", "tscompat", name+".golden"), x.buf.Bytes())
}

// TestTSCompat_Golden holds, for each of the seven places where the
// TypeScript client failed against this bridge, the exchange the
// TypeScript cli-bridge has, as a golden request/response pair.
func TestTSCompat_Golden(t *testing.T) {
	exact := `"provider":"cli-bridge","environment_id":"env-ts","execution_id":"exec-ts","session_id":"ses-ts"`

	t.Run("1-cancellation-digest", func(t *testing.T) {
		v := newEnv(t, config{})
		x := &exchanges{t: t, v: v}
		resp, _ := openStream(t, v, chatBody("ts-cancel", "stall", true, exact))
		ref := headerRef(resp.Header)
		req := wire.CancellationRequest{OperationID: "op-ts-1", Run: ref, Reason: "provider cleanup"}
		withDigest := func(d string) string {
			r := req
			r.RequestDigest = d
			return string(wire.MustJSON(r))
		}
		x.do("no requestDigest: refused", "POST", "/v1/runs/ts-cancel/cancel", strings.Replace(withDigest(""), `,"requestDigest":""`, "", 1), nil, nil)
		x.do("a requestDigest of other content: refused", "POST", "/v1/runs/ts-cancel/cancel", withDigest("sha256:"+strings.Repeat("0", 64)), nil, nil)
		d, err := wire.CancellationDigest(req)
		if err != nil {
			t.Fatal(err)
		}
		code, body := x.do("the digest of {operationId, run, reason}: acknowledged with it", "POST", "/v1/runs/ts-cancel/cancel?wait_ms=10000", withDigest(d), nil, nil)
		var ack wire.CancellationAck
		if json.Unmarshal(body, &ack); code != 200 || ack.RequestDigest != d || ack.Effect != wire.EffectCancelled {
			t.Errorf("exact cancel = %d %s, want 200 cancelled echoing %s", code, body, d)
		}
		x.do("the same operation again: replayed", "POST", "/v1/runs/ts-cancel/cancel", withDigest(d), nil, nil)
		x.check("1-cancellation-digest")
	})

	t.Run("2-interaction-operation-reused", func(t *testing.T) {
		v := newEnv(t, config{})
		x := &exchanges{t: t, v: v}
		createSession(t, v, "ses-ia", "")
		postTurn(t, v, "ses-ia", turnBody("t1", "run-ia", "bash:echo hi"))
		events := openEvents(t, v, "/v1/runs/run-ia/events", "")
		asked := events.until(func(f cframe) bool { return f.typ == "interaction" })
		b := bindingOf(t, asked[len(asked)-1])
		path := "/v1/runs/run-ia/interactions/" + b.InteractionID + "/respond"
		accept := command(t, "op-ia-1", b, wire.OutcomeAccepted)
		accept.Response.Data = json.RawMessage(`{"grant":["allow_once"]}`)
		accept.CommandDigest, _ = wire.InteractionCommandDigest(b, accept.Response)
		x.do("accepted", "POST", path, string(wire.MustJSON(accept)), nil, nil)
		x.do("the same command again: the stored acknowledgement", "POST", path, string(wire.MustJSON(accept)), nil, nil)
		declined := command(t, "op-ia-1", b, wire.OutcomeDeclined)
		code, body := x.do("the same operation id with another response: already_resolved_different for the new command", "POST", path, string(wire.MustJSON(declined)), nil, nil)
		var ack wire.InteractionAck
		if json.Unmarshal(body, &ack); code != 409 || ack.Status != wire.InteractionAlreadyResolvedDifferent || ack.CommandDigest != declined.CommandDigest {
			t.Errorf("reused operation id = %d %s, want 409 already_resolved_different echoing %s", code, body, declined.CommandDigest)
		}
		x.check("2-interaction-operation-reused")
	})

	t.Run("3-native-continuation", func(t *testing.T) {
		v := newNativeEnv(t)
		x := &exchanges{t: t, v: v}
		run, boundary := firstTurn(t, v, "ses-nc")
		boundary.ObservedAt = "2026-01-01T00:00:00Z" // a fixed time the caller observed it at
		_, body := continueRequest(t, "op-nc-1", run, boundary, "hello")
		code, out := x.do("accepted: the observed boundary, the usage, the run's identity and events", "POST", "/v1/sessions/ses-nc/continue", body, nil, nil)
		var o wire.ContinuationOutcome
		if json.Unmarshal(out, &o); code != 200 || o.Acknowledgement.ActualBoundary == nil || o.Result == nil || o.Result.Usage == nil {
			t.Errorf("continue = %d %s", code, out)
		}
		x.check("3-native-continuation")
	})

	t.Run("4-placement", func(t *testing.T) {
		v := newEnv(t, config{})
		x := &exchanges{t: t, v: v}
		x.do("placement is claimed", "GET", "/v1/capabilities?model=claude-code/sonnet", "", nil, func(m map[string]any) map[string]any {
			return map[string]any{"placement": m["placement"], "observation": m["observation"]}
		})
		x.check("4-placement")
	})

	t.Run("5-result-after-replay", func(t *testing.T) {
		// The store's clock moves past the replay retention on demand.
		var ahead atomic.Int64
		now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
		v := newEnv(t, config{store: store.Options{ReplayTTL: time.Millisecond, Now: now}})
		x := &exchanges{t: t, v: v}
		v.do(t, "POST", "/v1/chat/completions", chatBody("ts-short", "hello", false, exact))
		long := v.do(t, "POST", "/v1/chat/completions", chatBody("ts-long", "many:1100", false,
			`"provider":"cli-bridge","environment_id":"env-ts","execution_id":"exec-long","session_id":"ses-long"`))
		want := decode[wire.Completion](t, long).Choices[0].Message.Content
		ahead.Store(int64(time.Second))
		if err := v.e.Prune(t.Context()); err != nil {
			t.Fatal(err)
		}
		x.do("the run after its full replay: expired, its result kept", "GET", "/v1/runs/ts-short", "", nil, nil)
		x.do("its events from the start", "GET", "/v1/runs/ts-short/events", "", nil, nil)
		x.do("a long run from within its folded events: expired", "GET", "/v1/runs/ts-long/events", "", []string{wire.HeaderLastEventID, "5"}, nil)
		resp := v.do(t, "GET", "/v1/runs/ts-long/events", "")
		s := readSSE(t, resp.Body)
		if got := text(t, s.frames); resp.StatusCode != 200 || !s.done || got != want || len(s.frames) > store.KeptResultEvents+1 {
			t.Errorf("long run from the start = %d, %d frames, text %d bytes, want its whole text (%d bytes) in at most %d frames",
				resp.StatusCode, len(s.frames), len(got), len(want), store.KeptResultEvents+1)
		}
		x.check("5-result-after-replay")
	})

	t.Run("6-error-bodies", func(t *testing.T) {
		v := newEnv(t, config{})
		x := &exchanges{t: t, v: v}
		x.do("unknown model", "POST", "/v1/chat/completions", `{"model":"nope/x","messages":[{"role":"user","content":"hi"}]}`, nil, nil)
		v.do(t, "POST", "/v1/chat/completions", chatBody("ts-conflict", "hello", false, exact))
		x.do("a run id reused for another request", "POST", "/v1/chat/completions", chatBody("ts-conflict", "hello again", false, exact), nil, nil)
		x.check("6-error-bodies")
	})

	t.Run("7-run-headers", func(t *testing.T) {
		v := newEnv(t, config{})
		x := &exchanges{t: t, v: v}
		x.do("a run without caller coordinates has all of them", "POST", "/v1/chat/completions", chatBody("ts-plain", "hello", false), nil,
			func(m map[string]any) map[string]any { return map[string]any{"id": m["id"]} })
		x.do("and so has its snapshot", "GET", "/v1/runs/ts-plain", "", nil, func(m map[string]any) map[string]any {
			return map[string]any{"id": m["id"], "provider": m["provider"], "environmentId": m["environmentId"],
				"sessionId": m["sessionId"], "executionId": m["executionId"], "requestDigest": m["requestDigest"]}
		})
		x.check("7-run-headers")
	})
}
