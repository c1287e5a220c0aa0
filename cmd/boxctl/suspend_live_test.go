package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/provider/sandbox/localrouter"
	"github.com/tangle-network/boxctl/vendors"
)

// TestBoxVerbs_SuspendResume: up --retention makes a suspendable box;
// suspend stops it, resume starts it with a new bearer, and the next turn
// runs.
func TestBoxVerbs_SuspendResume(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	useState(t)
	cleanupState(t, v)
	key := localrouter.NewKey()
	const reply = "Still here after the resume."
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: routerstub.ScriptFunc(func(routerstub.Request) routerstub.Reply { return routerstub.Text(reply) })})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(routerKeyVar, key)
	t.Setenv(routerURLEnv, serveRouterStub(t, v, stub))
	r := boxctl(t, t.Context(), nil, "up", "--image", img, "--retention", "1h", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	before := mustState(t).Find(up.ID).Reference.Bearer
	if r := boxctl(t, t.Context(), nil, "turn", "last", "hello"); r.code != 0 {
		t.Fatalf("turn: exit %d: %v", r.code, r.err)
	}
	if r := boxctl(t, t.Context(), nil, "suspend", "last"); r.code != 0 || !strings.Contains(r.stdout, "suspended") {
		t.Fatalf("suspend: exit %d: %v %q", r.code, r.err, r.stdout)
	}
	box, err := v.Connect(t.Context(), up.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := box.Status(t.Context()); err != nil || st.State != vendors.StateSuspended {
		t.Fatalf("box after suspend: %s (%v), want suspended", st.State, err)
	}
	if r := boxctl(t, t.Context(), nil, "resume", "last"); r.code != 0 || !strings.Contains(r.stdout, "resumed") {
		t.Fatalf("resume: exit %d: %v %q", r.code, r.err, r.stdout)
	}
	if after := mustState(t).Find(up.ID).Reference.Bearer; after == before || after == "" {
		t.Error("the state's bearer did not change with the resume")
	}
	if r := boxctl(t, t.Context(), nil, "turn", "last", "again"); r.code != 0 || !strings.Contains(r.stdout, reply) {
		t.Fatalf("turn after resume: exit %d (%v), stdout %q", r.code, r.err, r.stdout)
	}
	if r := boxctl(t, t.Context(), nil, "rm", "last"); r.code != 0 {
		t.Fatalf("rm: exit %d: %v", r.code, r.err)
	}
}
