package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// routerReplying serves a model Router that answers every turn with reply,
// named in the environment as up and resume read it.
func routerReplying(t *testing.T, v localrouter.HostAddresser, reply string) {
	key := localrouter.NewKey()
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: routerstub.ScriptFunc(func(routerstub.Request) routerstub.Reply { return routerstub.Text(reply) })})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(routerKeyVar, key)
	t.Setenv(routerURLEnv, serveRouterStub(t, v, stub))
}

// TestBoxVerbs_SuspendResume: up --retention makes a suspendable box;
// suspend stops it, resume starts it with a new bearer, and the next turn
// runs.
func TestBoxVerbs_SuspendResume(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	useState(t)
	cleanupState(t, v)
	const reply = "Still here after the resume."
	routerReplying(t, v, reply)
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

// TestBoxVerbs_GCIdleSuspend: up --idle-suspend leaves a box no process
// watches; gc --every suspends it once it had no turn that long and
// records it as suspend does, so resume starts it again and the next turn
// runs. Ctrl-C (the end of its context) ends gc --every cleanly.
func TestBoxVerbs_GCIdleSuspend(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	useState(t)
	cleanupState(t, v)
	const reply = "Awake again after the idle suspend."
	routerReplying(t, v, reply)
	r := boxctl(t, t.Context(), nil, "up", "--image", img, "--idle-suspend", "3s", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	if r := boxctl(t, t.Context(), nil, "turn", "last", "hello"); r.code != 0 {
		t.Fatalf("turn: exit %d: %v", r.code, r.err)
	}
	box, err := v.Connect(t.Context(), up.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := box.Status(t.Context()); err != nil || st.Labels[boxmeta.LabelIdleSuspend] != "3s" || st.Labels[boxmeta.LabelRetention] == "" {
		t.Fatalf("box labels %v (%v): want its idle threshold and a retention", st.Labels, err)
	}
	gcCtx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan cmdResult, 1)
	go func() { done <- boxctl(t, gcCtx, nil, "gc", "--every", "1s", "-o", "json") }()
	polltest.Until(t, 2*time.Minute, "gc to suspend the idle box", func() bool {
		st, err := box.Status(t.Context())
		return err == nil && st.State == vendors.StateSuspended
	})
	// The record changes right after the suspend, in the same round.
	polltest.Until(t, time.Minute, "the state to record the suspend", func() bool {
		rec := mustState(t).Find(up.ID)
		return rec != nil && rec.Reference.Bearer == ""
	})
	stop()
	if r := <-done; r.code != 0 || !strings.Contains(r.stdout, `"suspended"`) || !strings.Contains(r.stdout, up.ID) {
		t.Fatalf("gc --every: exit %d (%v), stdout %q; want exit 0 after Ctrl-C, having suspended %s", r.code, r.err, r.stdout, up.ID)
	}
	if r := boxctl(t, t.Context(), nil, "resume", "last"); r.code != 0 || !strings.Contains(r.stdout, "resumed") {
		t.Fatalf("resume: exit %d: %v %q", r.code, r.err, r.stdout)
	}
	if r := boxctl(t, t.Context(), nil, "turn", "last", "again"); r.code != 0 || !strings.Contains(r.stdout, reply) {
		t.Fatalf("turn after resume: exit %d (%v), stdout %q", r.code, r.err, r.stdout)
	}
	if r := boxctl(t, t.Context(), nil, "rm", "last"); r.code != 0 {
		t.Fatalf("rm: exit %d: %v", r.code, r.err)
	}
}

// TestBoxVerbs_LocalSuspendResume: a box of the local model endpoint is
// suspended and resumed with no key in the caller's hands (the broker
// holds the endpoint's key; the resume only rotates the box's token), and
// the next turn answers; neither the state file nor the box's container
// config holds the endpoint's key.
func TestBoxVerbs_LocalSuspendResume(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	state := useState(t)
	cleanupState(t, v)
	for _, k := range []string{routerURLEnv, routerKeyVar, "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"} {
		t.Setenv(k, "")
	}
	r := boxctl(t, t.Context(), nil, "up", "--image", img, "--router", "local", "--retention", "1h", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil || !strings.HasPrefix(up.Upstream, "local-") {
		t.Fatalf("up = %+v, %v; want a local upstream", up, err)
	}
	for i, step := range [][]string{{"turn", "last", "hello"}, {"suspend", "last"}, {"resume", "last"}, {"turn", "last", "again"}} {
		r := boxctl(t, t.Context(), nil, step...)
		if r.code != 0 || (i%3 == 0 && !strings.Contains(r.stdout, localReply)) {
			t.Fatalf("%v: exit %d (%v), stdout %q", step, r.code, r.err, r.stdout)
		}
	}
	// The endpoint's key, as its process's environment holds it: in
	// neither the state file, the container's config nor the box.
	rec := mustState(t).Find(up.ID)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", rec.Router.PID))
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for _, kv := range strings.Split(string(environ), "\x00") {
		if v, ok := strings.CutPrefix(kv, routerKeyEnv+"="); ok {
			key = v
		}
	}
	if len(key) < 16 {
		t.Fatalf("the endpoint's key %q: not found", key)
	}
	raw, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	box, err := v.Connect(t.Context(), up.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
		`cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; grep -rIl --exclude-dir=proc --exclude-dir=sys -e "$0" / 2>/dev/null; echo`,
		// The key as a pattern that matches it, so that the command line
		// does not hold it.
		key[:8] + "[" + key[8:9] + "]" + key[9:]}})
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{"state file": string(raw), "container config": boxtest.Inspect(t, up.ID), "box": string(res.Stdout)} {
		if strings.Contains(text, key) {
			t.Errorf("the model key is in the %s", where)
		}
	}
	if r := boxctl(t, t.Context(), nil, "rm", "last"); r.code != 0 {
		t.Fatalf("rm: exit %d: %v", r.code, r.err)
	}
}
