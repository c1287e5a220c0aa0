package pi_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness/harnesstest"
	"github.com/tangle-network/boxctl/bridge/harness/pi"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
)

// piReleases are the Pi packages the retained session tests drive.
var piReleases = []struct{ spec, version string }{
	{"@earendil-works/pi-coding-agent@1.6.0", "1.6.0"},
	{"@mariozechner/pi-coding-agent@0.73.1", "0.73.1"},
}

// piModel is the model id of every retained Pi session here.
const piModel = "pi/router/router-chat"

// TestLive_PiRetainedSession runs three retained turns of one Pi session
// with the real CLI of each release line: a session reader drops after
// turn two and resumes from its cursor without a gap or a duplicate, and
// the third model request carries the earlier turns.
func TestLive_PiRetainedSession(t *testing.T) {
	for _, rel := range piReleases {
		t.Run(rel.version, func(t *testing.T) {
			answers := []string{"pi one " + harnesstest.RandomHex(4), "pi two " + harnesstest.RandomHex(4), "pi three " + harnesstest.RandomHex(4)}
			script := routerstub.NewQueue(routerstub.Text("unexpected extra call"),
				routerstub.Deltas(answers[0], 3), routerstub.Deltas(answers[1], 3), routerstub.Deltas(answers[2], 3))
			l := harnesstest.Start(t, harnesstest.Config{Adapter: pi.Adapter{}, Spec: rel.spec, Bin: "pi", Script: script,
				ServedModel: "router-served-model"})
			l.CreateSession(t, "ps1", piModel, l.Work, "")

			resp := l.Do(t, "GET", "/v1/sessions/ps1/events", "")
			br := bufio.NewReader(resp.Body)
			var seen []harnesstest.Frame
			for i, msg := range []string{"first question", "second question"} {
				start := time.Now()
				adm := l.PostTurn(t, "ps1", strconv.Itoa(i+1), msg, "box", "env-1")
				if adm.Session.ContextBoundary == nil || adm.Session.ContextBoundary.Boundary.Revision != strconv.Itoa(i+1) {
					t.Errorf("turn %d boundary = %+v, want revision %d", i+1, adm.Session.ContextBoundary, i+1)
				}
				frames := harnesstest.ReadFrames(t, br, harnesstest.Terminal)
				t.Logf("turn %d took %s over %d frames", i+1, time.Since(start).Round(time.Millisecond), len(frames))
				if last := frames[len(frames)-1]; last.Status != "completed" || !strings.Contains(harnesstest.TextOf(frames), answers[i]) {
					t.Fatalf("turn %d ended %q with text %q, want completed with %q", i+1, last.Status, harnesstest.TextOf(frames), answers[i])
				}
				seen = append(seen, frames...)
			}
			resp.Body.Close() // the reader drops
			cursor := seen[len(seen)-1].ID

			start := time.Now()
			l.PostTurn(t, "ps1", "3", "third question", "box", "env-1")
			req, _ := http.NewRequestWithContext(t.Context(), "GET", l.URL+"/v1/sessions/ps1/events", nil)
			req.Header.Set("Authorization", "Bearer "+harnesstest.Bearer)
			req.Header.Set(wire.HeaderLastEventID, strconv.FormatInt(cursor, 10))
			resumed, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resumed.Body.Close()
			rest := harnesstest.ReadFrames(t, bufio.NewReader(resumed.Body), harnesstest.Terminal)
			t.Logf("turn 3 took %s; resumed reader got %d frames after cursor %d", time.Since(start).Round(time.Millisecond), len(rest), cursor)
			if got := harnesstest.TextOf(rest); !strings.Contains(got, answers[2]) || strings.Contains(got, answers[1]) {
				t.Errorf("turn 3 text after the cursor = %q, want %q alone", got, answers[2])
			}
			all := append(seen, rest...)
			ids := map[string]bool{}
			for i, f := range all {
				if f.ID != int64(i+1) {
					t.Fatalf("session frame %d has id %d: a gap or a duplicate", i+1, f.ID)
				}
				if ids[f.Env.EventID] {
					t.Fatalf("event %s seen twice", f.Env.EventID)
				}
				ids[f.Env.EventID] = true
			}
			reqs := l.ModelRequests()
			if len(reqs) != 3 {
				t.Fatalf("model requests = %d, want 3", len(reqs))
			}
			if body := string(reqs[2].Body); !strings.Contains(body, answers[0]) || !strings.Contains(body, answers[1]) ||
				!strings.Contains(body, "first question") {
				t.Errorf("the third model request lacks the earlier turns: the session was not resumed")
			}
			l.CheckKeyed(t, routerstub.AuthBearer)
		})
	}
}
