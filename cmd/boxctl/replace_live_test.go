package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox/broker"
)

// TestBoxVerbs_Replace: a box removed behind boxctl's back (its
// container deleted) is lost. A turn in it says so and how to go on;
// `turn --replace` continues the session on a new box, which gets the
// session's history with the turn (the model sees the first turn's
// words), takes the lost box's place in the state, and says how each
// session continued.
func TestBoxVerbs_Replace(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	useState(t)
	cleanupState(t, v)
	tr := &transcript{}

	key := localrouter.NewKey()
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: routerstub.ScriptFunc(func(routerstub.Request) routerstub.Reply {
		return routerstub.Text("Noted.")
	})})
	if err != nil {
		t.Fatal(err)
	}
	routerURL := serveRouterStub(t, v, stub)
	t.Setenv(routerKeyVar, key)
	t.Setenv(routerURLEnv, "")
	saw := func(parts ...string) int {
		n := 0
	next:
		for _, r := range stub.Requests() {
			for _, p := range parts {
				if r.Side || !strings.Contains(r.Prompt, p) {
					continue next
				}
			}
			n++
		}
		return n
	}

	r := boxctl(t, t.Context(), tr, "up", "--router", routerURL, "--image", img, "--lifetime", "10m", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	const mark, ask = "the number is 7341", "which number was it"
	if r := boxctl(t, t.Context(), tr, "turn", "last", "Remember: "+mark, "--session", "s1"); r.code != 0 {
		t.Fatalf("turn: exit %d: %v", r.code, r.err)
	}
	// The turn's end is outside the box before the box goes.
	st0, err := boxstate.Open(boxstate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bc := broker.Dial(brokerSocket(st0))
	defer bc.Close()
	polltest.Until(t, time.Minute, "the replica to hold the turn's end", func() bool {
		runs, err := bc.ReplicaRuns(t.Context(), up.ID)
		return err == nil && len(runs) == 1 && runs[0].Status != "running"
	})
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := cli.ContainerRemove(t.Context(), up.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if r := boxctl(t, t.Context(), tr, "turn", "last", ask, "--session", "s1"); r.code == 0 || !strings.Contains(r.stderr+r.err.Error(), "--replace") {
		t.Fatalf("a turn in the lost box: exit %d, %v; want a failure naming --replace", r.code, r.err)
	}
	r = boxctl(t, t.Context(), tr, "turn", "last", ask, "--session", "s1", "--replace")
	if r.code != 0 {
		t.Fatalf("turn --replace: exit %d: %v", r.code, r.err)
	}
	if !strings.Contains(r.stderr, "was lost; box") || !strings.Contains(r.stderr, "session s1: 1 turns of history (transcript)") {
		t.Errorf("turn --replace said:\n%s\nwant the new box and how the session continued", r.stderr)
	}
	if n := saw(mark, "assistant: Noted.", ask); n != 1 {
		t.Errorf("the model got %d requests with the turn and the session's history, want 1", n)
	}
	st := mustState(t)
	if st.Find(up.ID) != nil || len(st.Boxes) != 1 || st.Boxes[0].Reference == nil || len(st.Boxes[0].Reference.Continues) != 1 ||
		st.Boxes[0].Reference.Continues[0] != up.ID {
		t.Fatalf("the state after --replace: %+v; want the new box alone, continuing %s", st.Boxes, up.ID)
	}
	// The next turn goes to the new box as "last", in the same session.
	if r := boxctl(t, t.Context(), tr, "turn", "last", "And again: "+ask, "--session", "s1"); r.code != 0 {
		t.Fatalf("a turn in the new box: exit %d: %v", r.code, r.err)
	}
	tr.noSecrets(t, map[string]string{"router key": key})
}
