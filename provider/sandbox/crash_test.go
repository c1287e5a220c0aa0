package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
)

// servingBridge returns the pid of the serving bridge in env's box (the
// supervisor's child), "" when none runs.
func servingBridge(t *testing.T, env *sandbox.Environment) string {
	t.Helper()
	res, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
		`for d in /proc/[0-9]*; do case "$(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)" in *box-bridge" -supervised"*) echo "${d#/proc/}" ;; esac; done`}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("list the serving bridge: %v %s", err, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// TestProvider_BridgeCrashInBox kills the serving bridge in a Docker box
// with SIGKILL mid-turn: the supervisor starts it again on the same data
// and secrets, the interrupted run ends error/bridge_restarted, the
// reader resumes from its cursor and sees every event once, and the next
// turn runs. The box's user can read neither process's environment.
func TestProvider_BridgeCrashInBox(t *testing.T) {
	t.Parallel()
	f := setup(t)
	env := create(t, f.Provider(t, nil), sandbox.CreateRequest{Profile: claude})
	first := servingBridge(t, env)
	if first == "" || strings.Contains(first, "\n") {
		t.Fatalf("serving bridges in the box: %q, want one", first)
	}
	// The supervisor is the serving bridge's parent.
	for _, pid := range []string{first, "$(cut -d' ' -f4 /proc/" + first + "/stat)"} {
		res, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "cat /proc/" + pid + "/environ"}})
		if err != nil || res.ExitCode == 0 || bytes.Contains(res.Stdout, []byte(env.Reference().Bearer)) {
			t.Errorf("the box user read /proc/%s/environ: exit %d, %v", pid, res.ExitCode, err)
		}
	}

	ref, err := env.Dispatch(t.Context(), provider.Turn{Prompt: promptPaced})
	if err != nil {
		t.Fatal(err)
	}
	s, err := env.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		t.Fatal(err)
	}
	var seen []provider.Event
	for ev, err := range s.Events(t.Context(), "0") {
		if err != nil {
			t.Fatalf("events before the kill: %v", err)
		}
		seen = append(seen, ev)
		if ev.Delta != "" && len(seen) >= 4 {
			break
		}
	}
	killed := time.Now()
	res, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "kill -9 " + first}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("kill -9 %s in the box: %v %s", first, err, res.Stderr)
	}
	var resumedIn time.Duration
	var terr error
	for ev, err := range s.Events(t.Context(), seen[len(seen)-1].ID) {
		if err != nil {
			terr = err
			break
		}
		if resumedIn == 0 {
			resumedIn = time.Since(killed)
		}
		seen = append(seen, ev)
	}
	t.Logf("kill -9 to the resumed stream's first event: %v", resumedIn.Round(time.Millisecond))
	var be *provider.BridgeError
	if !errors.As(terr, &be) || !strings.Contains(be.Message, "restarted") {
		t.Errorf("the resumed stream ended with %v, want the run's bridge_restarted failure", terr)
	}
	ids := map[string]bool{}
	for _, ev := range seen {
		if ids[ev.ID] {
			t.Errorf("event %s seen twice", ev.ID)
		}
		ids[ev.ID] = true
	}
	st, err := s.Status(t.Context())
	if err != nil || !st.Terminal || st.Snapshot.Error == nil || st.Snapshot.Error.Type != wire.TypeBridgeRestarted {
		t.Errorf("run after the kill = %+v, %v, want terminal with %s", st.Snapshot, err, wire.TypeBridgeRestarted)
	}
	second := servingBridge(t, env)
	if second == "" || second == first {
		t.Errorf("serving bridge after the kill = %q, want a new one (the first was %s)", second, first)
	}
	if text, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."}); err != nil || !strings.Contains(text, replyText) {
		t.Errorf("a turn after the restart = %q, %v, want the reply (bearer and router key kept)", text, err)
	}
	_, stderr, _ := env.BridgeLog(t.Context())
	if !bytes.Contains(stderr, []byte("serving bridge ended; restarting")) {
		t.Errorf("the bridge's log names no restart:\n%s", stderr)
	}
}

// followed is what the follow child prints: the box's reference (as
// every child does) and the run's, then one line per event it read.
type followed struct {
	Box sandbox.Reference
	Run provider.Reference
}

type seenEvent struct {
	ID  string          `json:"id"`
	Raw json.RawMessage `json:"raw"`
}

// follow is the child that dispatches a paced turn and reads its events
// until it is killed.
func follow(e *sandbox.Environment) int {
	ctx := context.Background()
	ref, err := e.Dispatch(ctx, provider.Turn{Prompt: promptPaced})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(ref); err != nil {
		return 1
	}
	s, err := e.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for ev, err := range s.Events(ctx, "0") {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = out.Encode(seenEvent{ID: ev.ID, Raw: ev.Raw})
	}
	select {} // until killed
}

// TestProvider_CallerDiesMidStream kills a process that follows a run with
// SIGKILL mid-stream; a new provider Connects from the reference it
// persisted and reads every event of the run, those the dead one saw the
// same, then the rest live to the run's result.
func TestProvider_CallerDiesMidStream(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tag := sandbox.NewRunTag()
	t.Cleanup(func() { assertNoBoxes(t, f.Vendor, tag) })
	cmd, dec := execChild(t, f, "follow", tag, 10*time.Minute)
	var fw followed
	if err := dec.Decode(&fw.Box); err != nil {
		t.Fatalf("child printed no box reference: %v", err)
	}
	if err := dec.Decode(&fw.Run); err != nil {
		t.Fatalf("child printed no run reference: %v", err)
	}
	var before []seenEvent
	for len(before) < 5 {
		var ev seenEvent
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("child's event %d: %v", len(before), err)
		}
		before = append(before, ev)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// The reference went through a file: only what was persisted is known.
	raw, _ := json.Marshal(fw)
	var saved followed
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	p := f.Provider(t, func(o *sandbox.Options) { o.RunTag = tag })
	env, err := p.Connect(t.Context(), saved.Box)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = env.Destroy(context.WithoutCancel(t.Context())) })
	s, err := env.Session(saved.Run.ID, provider.SessionOptions{ControlRef: &saved.Run.ControlRef})
	if err != nil {
		t.Fatalf("Session from the persisted run reference: %v", err)
	}
	var all []provider.Event
	for ev, err := range s.Events(t.Context(), "0") {
		if err != nil {
			t.Fatalf("events after %d: %v", len(all), err)
		}
		all = append(all, ev)
	}
	if len(all) < len(before) {
		t.Fatalf("the new caller read %d events, fewer than the %d the dead one saw", len(all), len(before))
	}
	for i, b := range before {
		if all[i].ID != b.ID || !bytes.Equal(all[i].Raw, b.Raw) {
			t.Errorf("event %d: the new caller read %s %s, the dead one saw %s %s", i, all[i].ID, all[i].Raw, b.ID, b.Raw)
		}
	}
	var text strings.Builder
	ids := map[string]bool{}
	for _, ev := range all {
		if ids[ev.ID] {
			t.Errorf("event %s read twice", ev.ID)
		}
		ids[ev.ID] = true
		text.WriteString(ev.Delta)
	}
	if last := all[len(all)-1]; last.Type != provider.EventResult || text.String() != pacedText {
		t.Errorf("the run read by the new caller ends %s with text %q, want its result and the whole reply", last.Type, text.String())
	}
}
