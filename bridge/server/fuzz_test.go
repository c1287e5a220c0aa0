package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/engine"
	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// FuzzDecodeChat throws arbitrary bodies and identity headers at the chat
// request decoder: it must never panic, every rejection must be a 4xx
// with a stable type and a message, and every acceptance must carry a
// valid run id, a resolved harness and a digest that does not depend on
// anything but the input.
func FuzzDecodeChat(f *testing.F) {
	seeds := []struct{ body, session, run, cursor string }{
		{chatBody("run-1", "hello", true), "", "", ""},
		{chatBody("", "hello", false, `"session_id":"s-1"`), "s-1", "", "3"},
		{chatBody("a", "hi", true, `"provider":"docker","environment_id":"e","execution_id":"x"`), "", "a", "0"},
		{`{"model":"claude-code","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"metadata":{"n":1.0,"k":[1,2,{"z":null}]}}`, "", "", ""},
		{`{"model":"claude-code/opus","messages":[{"role":"system","content":null},{"role":"user","content":"x"}],"cwd":"/tmp","env":{"A":"b"}}`, "", "", ""},
		{`{"model":"gpt-4","messages":[{"role":"user","content":"x"}]}`, "", "", ""},
		{`{"model":"claude-code","messages":[{"role":"robot","content":1}]}`, "", "", ""},
		{`{"model":"claude-code","messages":[{"role":"user","content":"x"}],"run_id":"-bad"}`, "", "", "01"},
		{`{"model":"claude-code","messages":[{"role":"user","content":"x"}],"env":{"A=B":"c"}}`, "", "", ""},
		{`[1,2]`, "", "", ""}, {`null`, "", "", ""}, {`{"model":`, "", "", ""}, {"", "", "", ""},
		{`{"model":"claude-code","stream":"yes","messages":[]}`, "x", "y", "-1"},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.session, s.run, s.cursor)
	}
	srv := &Server{opts: Options{Backends: []*engine.Backend{{Adapter: claude.Adapter{}, Bin: "claude"}}}}
	f.Fuzz(func(t *testing.T, body []byte, session, run, cursor string) {
		h := http.Header{}
		for k, v := range map[string]string{wire.HeaderSessionID: session, wire.HeaderRunID: run, wire.HeaderLastEventID: cursor} {
			if v != "" {
				h.Set(k, v)
			}
		}
		in, bad := srv.decodeChat(body, h)
		if bad != nil {
			if bad.Type == "" || bad.Message == "" || bad.Status < 400 || bad.Status > 499 {
				t.Fatalf("decodeChat(%q) rejected with %+v, want a 4xx with a type and a message", body, bad)
			}
			return
		}
		if in.backend == nil || wire.ValidRunID(in.req.RunID) != nil || in.cursor < 0 {
			t.Fatalf("decodeChat(%q) = backend %v, run id %q, cursor %d", body, in.backend, in.req.RunID, in.cursor)
		}
		if n := countSet(in.req.Provider, in.req.EnvironmentID, in.req.ExecutionID); n != 0 && n != 3 {
			t.Fatalf("decodeChat(%q) accepted a partial identity %+v", body, in.req)
		}
		if !strings.HasPrefix(in.digest, "sha256:") || len(in.digest) != len("sha256:")+64 {
			t.Fatalf("decodeChat(%q) digest = %q", body, in.digest)
		}
		again, bad := srv.decodeChat(body, h)
		if bad != nil || again.digest != in.digest {
			t.Fatalf("decodeChat(%q) twice: digests %q then %q (%v)", body, in.digest, again.digest, bad)
		}
	})
}
