package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tangle-network/boxctl/bridge/wire"
)

func steerBody(t *testing.T, op string, run wire.RunRef, message string) string {
	t.Helper()
	b, err := json.Marshal(wire.SteerRequest{OperationID: op, Run: run, Message: message})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func refOf(a admission) wire.RunRef {
	r := a.Run
	return wire.RunRef{RunID: r.ID, Provider: r.Provider, EnvironmentID: r.EnvironmentID, SessionID: r.SessionID,
		ExecutionID: r.ExecutionID, RequestDigest: r.RequestDigest}
}

func TestSteer(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	done := postTurn(t, v, "s1", turnBody("t1", "r1", "hello"))
	waitRun(t, v, "r1")
	live := postTurn(t, v, "s1", turnBody("t2", "r2", "stall"))
	other := refOf(live)
	other.RequestDigest = done.Run.RequestDigest
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantAck    string // "" for an error body
	}{
		{"no message", steerBody(t, "op-a", refOf(live), ""), 400, ""},
		{"no run digest", steerBody(t, "op-a", wire.RunRef{RunID: "r2", SessionID: "s1", ExecutionID: "exec-t2"}, "go"), 400, ""},
		{"unknown field", `{"operationId":"op-a","message":"go","run":{},"colour":1}`, 400, ""},
		{"run of another request", steerBody(t, "op-b", other, "go"), 409, wire.ControlConflict},
		{"run that ended", steerBody(t, "op-c", refOf(done), "go"), 404, wire.ControlUnknownRun},
		// Claude Code takes no input while a turn runs.
		{"live run of a harness that takes no input", steerBody(t, "op-d", refOf(live), "go"), 501, wire.ControlCapabilityDenied},
		{"the same operation again", steerBody(t, "op-d", refOf(live), "go"), 501, wire.ControlCapabilityDenied},
		{"the operation for another message", steerBody(t, "op-d", refOf(live), "stop"), 409, wire.ControlConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := v.do(t, "POST", "/v1/sessions/s1/steer", tt.body)
			if tt.wantAck == "" {
				if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != tt.wantStatus || e.Error.Type != wire.TypeInvalidRequest {
					t.Errorf("steer = %d %+v, want %d %s", resp.StatusCode, e.Error, tt.wantStatus, wire.TypeInvalidRequest)
				}
				return
			}
			ack := decode[wire.ControlAck](t, resp)
			if resp.StatusCode != tt.wantStatus || ack.Status != tt.wantAck || ack.Kind != wire.ControlKindSteer || ack.SessionID != "s1" {
				t.Errorf("steer = %d %+v, want %d %s", resp.StatusCode, ack, tt.wantStatus, tt.wantAck)
			}
		})
	}
}

func TestInputQueue(t *testing.T) {
	v := newEnv(t, config{server: Options{InputQueueDepth: 1}})
	createSession(t, v, "s1", "")
	postTurn(t, v, "s1", turnBody("t1", "r1", "slow:5:40"))
	// /turns refuses a turn while the run is live; /input waits for it.
	if resp := v.do(t, "POST", "/v1/sessions/s1/turns", turnBody("t2", "r2", "hello")); resp.StatusCode != http.StatusConflict {
		t.Errorf("turn on a busy session = %d, want 409", resp.StatusCode)
	}
	resp := v.do(t, "POST", "/v1/sessions/s1/input", turnBody("t2", "r2", "slow:5:40"))
	a := decode[admission](t, resp)
	if resp.StatusCode != http.StatusAccepted || a.Run.ID != "r2" {
		t.Fatalf("queued input = %d %+v, want 202 run r2", resp.StatusCode, a)
	}
	if s := waitRun(t, v, "r1"); s.Status != wire.StatusDone {
		t.Errorf("the run before the input = %+v, want done", s)
	}
	// With one input waiting, the next is refused.
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, turn := range []string{"t3", "t4"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := mustRequestTo(t, v, "/v1/sessions/s1/input", turnBody(turn, "r-"+turn, "hello"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	full, ok := 0, 0
	for _, s := range statuses {
		switch s {
		case http.StatusTooManyRequests:
			full++
		case http.StatusAccepted:
			ok++
		}
	}
	// Both may get in when the first is admitted before the second asks.
	if ok == 0 || ok+full != 2 {
		t.Errorf("two inputs behind a live run with room for one = %v, want 202 and 202 or 429", statuses)
	}
}

func mustRequestTo(t *testing.T, v *env, path, body string) *http.Request {
	t.Helper()
	req := mustRequest(t, v, body)
	req.URL.Path = path
	return req
}

func TestSessionRoutes(t *testing.T) {
	v := newEnv(t, config{})
	createSession(t, v, "s1", "")
	waitRun(t, v, postTurn(t, v, "s1", turnBody("t1", "r1", "hello")).Run.ID)
	// A chat session's harness session, which DELETE forgets.
	v.do(t, "POST", "/v1/chat/completions", chatBody("c1", "hello", false, `"session_id":"chat-1"`)).Body.Close()
	tests := []struct {
		name, method, path string
		wantStatus         int
		check              func(t *testing.T, resp *http.Response)
	}{
		{"status", "GET", "/v1/sessions/s1/status", 200, func(t *testing.T, resp *http.Response) {
			if s := decode[wire.SessionView](t, resp); s.ID != "s1" || s.Status != wire.SessionIdle || s.Turns != 1 {
				t.Errorf("status = %+v, want s1 idle after 1 turn", s)
			}
		}},
		{"detach", "POST", "/v1/sessions/s1/detach", 200, func(t *testing.T, resp *http.Response) {
			if d := decode[wire.SessionDetach](t, resp); !d.Detached || d.Session.ID != "s1" || d.Session.Closed {
				t.Errorf("detach = %+v, want detached, the session open", d)
			}
		}},
		{"delete a chat session", "DELETE", "/v1/sessions/chat-1", 200, func(t *testing.T, resp *http.Response) {
			if d := decode[wire.SessionDelete](t, resp); !d.Deleted {
				t.Errorf("delete = %+v, want deleted", d)
			}
		}},
		{"delete it again", "DELETE", "/v1/sessions/chat-1?backend=claude-code", 200, func(t *testing.T, resp *http.Response) {
			if d := decode[wire.SessionDelete](t, resp); d.Deleted {
				t.Errorf("delete again = %+v, want nothing deleted", d)
			}
		}},
		{"delete a retained session", "DELETE", "/v1/sessions/s1", 409, nil},
		{"status of an unknown session", "GET", "/v1/sessions/nope/status", 404, nil},
		{"transcript of an unknown session", "GET", "/v1/sessions/nope/transcript", 404, nil},
		{"steer an unknown session", "POST", "/v1/sessions/nope/steer", 404, nil},
		{"detach an unknown session", "POST", "/v1/sessions/nope/detach", 404, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := v.do(t, tt.method, tt.path, "")
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.wantStatus)
			}
			if tt.check != nil {
				tt.check(t, resp)
			} else {
				resp.Body.Close()
			}
		})
	}
}

func TestProfiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"reviewer.json": `{"name":"Reviewer","description":"reads code","tags":["review"],"prompt":{"system":"be kind"}}`,
		"broken.json":   `{"name":`,
		"list.json":     `[1]`,
		"notes.txt":     `not a profile`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v := newEnv(t, config{server: Options{ProfilesDir: dir}})
	list := decode[wire.ProfileList](t, v.do(t, "GET", "/v1/profiles", ""))
	if len(list.Data) != 1 || list.Object != "list" || list.Data[0].ID != "reviewer" || list.Data[0].Name != "Reviewer" ||
		list.Data[0].Tags[0] != "review" || list.Data[0].LoadedAt == "" {
		t.Errorf("profiles = %+v, want reviewer alone (the others are not JSON objects)", list)
	}
	resp := v.do(t, "GET", "/v1/profiles/reviewer", "")
	doc := decode[wire.ProfileDocument](t, resp)
	var p struct{ Prompt struct{ System string } }
	if resp.StatusCode != 200 || doc.ID != "reviewer" || json.Unmarshal(doc.Profile, &p) != nil || p.Prompt.System != "be kind" {
		t.Errorf("profile = %d %+v, want the whole reviewer profile", resp.StatusCode, doc)
	}
	resp = v.do(t, "GET", "/v1/profiles/broken", "")
	if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != 404 || e.Error.Type != wire.TypeNotFound {
		t.Errorf("unknown profile = %d %+v, want 404", resp.StatusCode, e.Error)
	}
	t.Run("no catalog", func(t *testing.T) {
		v := newEnv(t, config{server: Options{ProfilesDir: filepath.Join(dir, "absent")}})
		if l := decode[wire.ProfileList](t, v.do(t, "GET", "/v1/profiles", "")); len(l.Data) != 0 || l.Data == nil {
			t.Errorf("profiles of no catalog = %+v, want an empty list", l)
		}
	})
}

func TestInputQueue_bounds(t *testing.T) {
	var q inputQueue
	leave, err := q.enter("s", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.enter("s", 1); err != errQueueFull {
		t.Errorf("second place in a queue of one = %v, want %v", err, errQueueFull)
	}
	if l, err := q.enter("other", 1); err != nil {
		t.Errorf("a place in another session's queue = %v", err)
	} else {
		l()
	}
	leave()
	if _, err := q.enter("s", 1); err != nil {
		t.Errorf("a place after the first left = %v", err)
	}

	t.Run("a run that does not end in time", func(t *testing.T) {
		v := newEnv(t, config{server: Options{InputQueueTimeout: 1}})
		createSession(t, v, "s1", "")
		postTurn(t, v, "s1", turnBody("t1", "r1", "stall"))
		resp := v.do(t, "POST", "/v1/sessions/s1/input", turnBody("t2", "r2", "hello"))
		if e := decode[wire.ErrorResponse](t, resp); resp.StatusCode != http.StatusRequestTimeout || e.Error.Type != wire.TypeInputQueueTimeout {
			t.Errorf("input behind a stalled run = %d %+v, want 408 %s", resp.StatusCode, e.Error, wire.TypeInputQueueTimeout)
		}
	})
}
