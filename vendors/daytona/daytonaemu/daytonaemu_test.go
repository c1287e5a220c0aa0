package daytonaemu_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
)

const key = "dtn_emulator_test"

func start(t *testing.T) *daytonaemu.Server {
	t.Helper()
	env := testbed.Require(t)
	emu, err := daytonaemu.New(daytonaemu.Options{APIKey: key, DockerHost: env.DockerHost, Network: "boxctl-test",
		Snapshots: map[string]string{"missing": "127.0.0.1:5000/boxctl-test/no-such-image:x"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	return emu
}

// call sends a request and returns the status, headers and JSON body.
func call(t *testing.T, method, u, auth, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, resp.Header, m
}

// TestServer_ErrorBodies checks the control plane's and the toolbox's
// refusals: statuses and the error bodies' fields.
func TestServer_ErrorBodies(t *testing.T) {
	emu := start(t)
	api := emu.APIURL()
	tests := []struct {
		name, method, url, auth, body string
		status                        int
		want                          map[string]any
	}{
		{"no key", "GET", api + "/sandbox", "", "", 401,
			map[string]any{"statusCode": 401.0, "error": "Unauthorized", "message": "Unauthorized", "path": "/api/sandbox"}},
		{"missing sandbox", "GET", api + "/sandbox/nope?verbose=true", key, "", 404,
			map[string]any{"statusCode": 404.0, "error": "Not Found", "message": "Sandbox with ID or name nope not found", "path": "/api/sandbox/nope?verbose=true"}},
		{"bad labels", "GET", api + "/sandbox?labels=" + url.QueryEscape("{not json"), key, "", 400,
			map[string]any{"error": "Bad Request", "message": "Invalid labels JSON format"}},
		{"unknown snapshot", "POST", api + "/sandbox", key, `{"snapshot":"nope"}`, 400,
			map[string]any{"message": "Snapshot nope not found. Did you add it through the Daytona Dashboard?"}},
		{"negative interval", "POST", api + "/sandbox", key, `{"snapshot":"missing","autoStopInterval":-1}`, 400,
			map[string]any{"message": "autoStopInterval must not be less than 0"}},
		{"missing snapshot record", "GET", api + "/snapshots/nope", key, "", 404,
			map[string]any{"message": "Snapshot with ID or name nope not found"}},
		{"volumes", "GET", api + "/volumes", key, "", 501,
			map[string]any{"statusCode": 501.0, "error": "Not Implemented", "message": "daytona emulator: volumes is not emulated"}},
		{"toolbox of a missing sandbox", "GET", emu.URL() + "/toolbox/nope/process/session", key, "", 401,
			map[string]any{"statusCode": 401.0, "code": "UNAUTHORIZED", "path": "/toolbox/nope/process/session"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, body := call(t, tt.method, tt.url, tt.auth, tt.body)
			if st != tt.status {
				t.Fatalf("%s %s = %d %v, want %d", tt.method, tt.url, st, body, tt.status)
			}
			for k, v := range tt.want {
				if body[k] != v {
					t.Errorf("body.%s = %v, want %v (body %v)", k, body[k], v, body)
				}
			}
			if _, ok := body["timestamp"]; !ok {
				t.Errorf("body lacks a timestamp: %v", body)
			}
		})
	}
}

// TestServer_SandboxLifecycle follows sandboxes of a snapshot whose image
// cannot be pulled: error with the reason, the list paged by cursor and
// filtered by labels, a deleted one gone from everything, a duplicate name
// refused, a preview without its token sent to log in.
func TestServer_SandboxLifecycle(t *testing.T) {
	emu := start(t)
	api := emu.APIURL()
	var ids []string
	for i, name := range []string{"a", "b", "c"} {
		st, _, sb := call(t, "POST", api+"/sandbox", key, `{"snapshot":"missing","name":"`+name+`","labels":{"run":"r1","n":"`+name+`"}}`)
		if st != 200 || sb["state"] != "creating" || sb["toolboxProxyUrl"] != emu.URL()+"/toolbox" || sb["autoDeleteInterval"] != -1.0 {
			t.Fatalf("create #%d = %d %v", i, st, sb)
		}
		ids = append(ids, sb["id"].(string))
	}
	if st, _, _ := call(t, "POST", api+"/sandbox", key, `{"snapshot":"missing","name":"a"}`); st != 409 {
		t.Errorf("create with a name in use = %d, want 409", st)
	}
	polltest.Until(t, time.Minute, "the sandboxes to fail", func() bool {
		_, _, sb := call(t, "GET", api+"/sandbox/"+ids[2], key, "")
		return sb["state"] == "error"
	})
	if _, _, sb := call(t, "GET", api+"/sandbox/"+ids[2], key, ""); !strings.Contains(sb["errorReason"].(string), "no-such-image") {
		t.Errorf("errorReason = %v, want the failed pull", sb["errorReason"])
	}

	labels := url.QueryEscape(`{"run":"r1"}`)
	_, _, page := call(t, "GET", api+"/sandbox?limit=2&labels="+labels, key, "")
	items, _ := page["items"].([]any)
	cursor, _ := page["nextCursor"].(string)
	if len(items) != 2 || cursor == "" || items[0].(map[string]any)["name"] != "c" {
		t.Fatalf("first page = %v, want the two newest and a cursor", page)
	}
	_, _, page = call(t, "GET", api+"/sandbox?limit=2&labels="+labels+"&cursor="+cursor, key, "")
	if items, _ := page["items"].([]any); len(items) != 1 || page["nextCursor"] != nil {
		t.Fatalf("second page = %v, want the last one and no cursor", page)
	}
	_, _, page = call(t, "GET", api+"/sandbox?labels="+url.QueryEscape(`{"run":"r1","n":"b"}`), key, "")
	if items, _ := page["items"].([]any); len(items) != 1 {
		t.Errorf("list by two labels = %v, want b only", page)
	}

	polltest.Until(t, time.Minute, "the first sandbox to fail", func() bool {
		_, _, sb := call(t, "GET", api+"/sandbox/"+ids[0], key, "")
		return sb["state"] == "error"
	})
	if st, _, sb := call(t, "DELETE", api+"/sandbox/"+ids[0], key, ""); st != 200 || sb["desiredState"] != "destroyed" {
		t.Fatalf("delete = %d %v", st, sb)
	}
	if st, _, _ := call(t, "GET", api+"/sandbox/"+ids[0], key, ""); st != 404 {
		t.Errorf("get after delete = %d, want 404", st)
	}
	_, _, page = call(t, "GET", api+"/sandbox?labels="+labels, key, "")
	if items, _ := page["items"].([]any); len(items) != 2 {
		t.Errorf("list after delete = %d items, want 2", len(items))
	}
	if st, _, _ := call(t, "POST", api+"/sandbox", key, `{"snapshot":"missing","name":"a"}`); st != 200 {
		t.Errorf("create with the deleted one's name = %d, want 200", st)
	}

	st, _, p := call(t, "GET", api+"/sandbox/"+ids[1]+"/ports/3000/preview-url", key, "")
	u, _ := p["url"].(string)
	if st != 200 || !strings.HasPrefix(u, "http://127.0.0.1:") || u == emu.URL() || p["token"] == "" {
		t.Fatalf("preview url = %d %v, want a loopback origin of its own", st, p)
	}
	if _, _, again := call(t, "GET", api+"/sandbox/"+ids[1]+"/ports/3000/preview-url", key, ""); again["url"] != u {
		t.Errorf("preview url asked again = %v, want %s", again["url"], u)
	}
	// Without the preview token the proxy sends the client to log in.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", u+"/x", nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(resp.Header.Get("Location"), "/auth/") {
		t.Errorf("preview without its token = %d %s, want a 307 to log in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if st, _, _ := call(t, "GET", api+"/sandbox/"+ids[1]+"/ports/70000/preview-url", key, ""); st != 400 {
		t.Errorf("preview url of port 70000 = %d, want 400", st)
	}
}

func TestServer_Faults(t *testing.T) {
	emu := start(t)
	if err := emu.SetFaults(daytonaemu.Faults{ErrorRate: 1.5}); err == nil {
		t.Error("SetFaults(rate 1.5) succeeded")
	}
	if err := emu.SetFaults(daytonaemu.Faults{ErrorRate: 1, Statuses: []int{429}, RetryAfter: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	st, h, body := call(t, "POST", emu.APIURL()+"/sandbox", key, `{"snapshot":"missing"}`)
	if st != 429 || h.Get("Retry-After-sandbox-create") != "3" || body["message"] != "ThrottlerException: Too Many Requests" {
		t.Errorf("throttled create = %d %v %v, want 429 with Retry-After-sandbox-create: 3", st, h, body)
	}
	st, h, _ = call(t, "GET", emu.APIURL()+"/sandbox", key, "")
	if st != 429 || h.Get("Retry-After-authenticated") != "3" {
		t.Errorf("throttled list = %d %v, want 429 with Retry-After-authenticated", st, h)
	}
}

// TestServer_Events speaks Socket.IO to the events channel as the SDK
// does: the Engine.IO open packet, a CONNECT refused for a wrong key and
// accepted for the right one, then the state events of a create.
func TestServer_Events(t *testing.T) {
	emu := start(t)
	u := strings.Replace(emu.URL(), "http://", "ws://", 1) + "/api/socket.io/?EIO=4&transport=websocket"
	recv := func(ws *websocket.Conn) string {
		t.Helper()
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			t.Fatal(err)
		}
		return msg
	}
	connect := func(token string) (*websocket.Conn, string) {
		ws, err := websocket.Dial(u, "", emu.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		if open := recv(ws); !strings.HasPrefix(open, `0{"maxPayload"`) || !strings.Contains(open, `"sid"`) {
			t.Fatalf("open packet = %q", open)
		}
		if err := websocket.Message.Send(ws, `40{"token":"`+token+`"}`); err != nil {
			t.Fatal(err)
		}
		return ws, recv(ws)
	}
	if _, got := connect("wrong"); got != `44{"message":"Unauthorized"}` {
		t.Errorf("CONNECT with a wrong key = %q, want a CONNECT_ERROR", got)
	}
	ws, got := connect(key)
	if !strings.HasPrefix(got, `40{"sid":"`) {
		t.Fatalf("CONNECT with the key = %q", got)
	}
	st, _, sb := call(t, "POST", emu.APIURL()+"/sandbox", key, `{"snapshot":"missing"}`)
	if st != 200 {
		t.Fatalf("create = %d %v", st, sb)
	}
	var created, failed bool
	for !created || !failed {
		msg := recv(ws)
		switch {
		case strings.HasPrefix(msg, `42["sandbox.created",{`) && strings.Contains(msg, sb["id"].(string)):
			created = true
		case strings.HasPrefix(msg, `42["sandbox.state.updated",{`) && strings.Contains(msg, `"newState":"error"`):
			failed = true
		}
	}
	resp, err := http.Get(emu.URL() + "/api/socket.io/?EIO=3&transport=polling")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a polling or Engine.IO 3 handshake = %d, want 400", resp.StatusCode)
	}
}

// TestServer_SandboxSnapshotRefusals checks the refusals of a sandbox
// snapshot and a fork: no name, a sandbox neither started nor stopped (one
// whose snapshot cannot be pulled), memory, a missing sandbox; a fork of
// a container sandbox is 422; deleting a missing snapshot is 404.
func TestServer_SandboxSnapshotRefusals(t *testing.T) {
	emu := start(t)
	api := emu.APIURL()
	st, _, sb := call(t, "POST", api+"/sandbox", key, `{"snapshot":"missing"}`)
	if st != 200 {
		t.Fatalf("create = %d %v", st, sb)
	}
	id := sb["id"].(string)
	polltest.Until(t, time.Minute, "the sandbox to fail", func() bool {
		_, _, sb := call(t, "GET", api+"/sandbox/"+id, key, "")
		return sb["state"] == "error"
	})
	tests := []struct {
		name, method, url, body string
		status                  int
		message                 string
	}{
		{"no name", "POST", api + "/sandbox/" + id + "/snapshot", `{}`, 400, "name must be a string"},
		{"not started or stopped", "POST", api + "/sandbox/" + id + "/snapshot", `{"name":"s1"}`, 400,
			"Sandbox must be in started or stopped state to create a snapshot"},
		{"missing sandbox", "POST", api + "/sandbox/nope/snapshot", `{"name":"s1"}`, 404, "Sandbox with ID or name nope not found"},
		{"fork of a container sandbox", "POST", api + "/sandbox/" + id + "/fork", `{}`, 422, "Forking is not supported for this sandbox"},
		{"delete a missing snapshot", "DELETE", api + "/snapshots/nope", "", 404, "Snapshot with ID nope not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, body := call(t, tt.method, tt.url, key, tt.body)
			if st != tt.status || body["message"] != tt.message {
				t.Errorf("%s %s = %d %v, want %d %q", tt.method, tt.url, st, body, tt.status, tt.message)
			}
		})
	}
}
