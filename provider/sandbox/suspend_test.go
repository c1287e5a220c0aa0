package sandbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// suspendCycles is the number of suspend/resume cycles of
// TestProvider_LiveSuspendResume: BOXCTL_SUSPEND_CYCLES, default 3 (make
// soak runs 100).
func suspendCycles(t *testing.T) int {
	if v := os.Getenv("BOXCTL_SUSPEND_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BOXCTL_SUSPEND_CYCLES=%q: want a positive count", v)
		}
		return n
	}
	return 3
}

// events records the provider's lifecycle events.
type events struct {
	mu  sync.Mutex
	all []sandbox.Event
}

func (r *events) add(ev sandbox.Event) { r.mu.Lock(); r.all = append(r.all, ev); r.mu.Unlock() }

func (r *events) count(typ sandbox.EventType, reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.all {
		if ev.Type == typ && (reason == "" || ev.Reason == reason) {
			n++
		}
	}
	return n
}

func suspendable(f *fixture, rec *events, edit func(*sandbox.Options)) func(*sandbox.Options) {
	return func(o *sandbox.Options) {
		o.Retention = time.Hour
		o.OnEvent = rec.add
		// Replay is kept an hour after a run, so every earlier run replays
		// after each resume.
		o.BridgeEnv = map[string]string{"BRIDGE_REPLAY_RETENTION_MS": "3600000"}
		if edit != nil {
			edit(o)
		}
	}
}

// sessionTurn dispatches one turn of session ses and reads its events to
// its end; it returns the turn's reference and its event ids and types.
func sessionTurn(t *testing.T, env *sandbox.Environment, ses, prompt string) (provider.Reference, []string) {
	t.Helper()
	ref, err := env.Dispatch(t.Context(), provider.Turn{Prompt: prompt, SessionID: ses, TurnID: "turn-" + prompt, ExecutionID: "exec-" + prompt})
	if err != nil {
		t.Fatalf("Dispatch %q: %v", prompt, err)
	}
	return ref, replay(t, env, ref)
}

// replay reads the events of run ref from the start.
func replay(t *testing.T, env *sandbox.Environment, ref provider.Reference) []string {
	t.Helper()
	s, err := env.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for ev, err := range s.Events(t.Context(), "0") {
		if err != nil {
			t.Fatalf("events of %s: %v", ref.ControlRef.RunID, err)
		}
		out = append(out, ev.ID+" "+ev.Type)
	}
	if len(out) == 0 {
		t.Fatalf("run %s has no events", ref.ControlRef.RunID)
	}
	return out
}

// bridgeGet sends GET path with bearer to the bridge of box b as the
// vendor's Endpoint client does (with a proxy's token, where the vendor
// has one): the bridge's bearer alone does not pass Daytona's preview URL.
func bridgeGet(t *testing.T, b vendors.Box, path, bearer string) *http.Response {
	t.Helper()
	ep, err := b.Endpoint(t.Context(), sandbox.BridgePort)
	if err != nil {
		t.Fatal(err)
	}
	client := ep.Client()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ep.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = closingBody{resp.Body, client}
	return resp
}

// closingBody closes its client's connections with the body.
type closingBody struct {
	io.ReadCloser
	client *http.Client
}

func (b closingBody) Close() error {
	err := b.ReadCloser.Close()
	b.client.CloseIdleConnections()
	return err
}

// rawReplay reads the stored frames of run id from the bridge's replay
// route, from the start: every frame as it is stored, its id with it.
func rawReplay(t *testing.T, env *sandbox.Environment, runID string) []string {
	t.Helper()
	resp := bridgeGet(t, env.Box(), "/v1/runs/"+runID+"/events", env.Reference().Bearer)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("replay of run %s: %d", runID, resp.StatusCode)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, ":") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		t.Fatalf("replay of run %s: %d lines, %v", runID, len(out), err)
	}
	return out
}

// mainRequest returns the body of the model request of the turn whose
// prompt holds marker.
func mainRequest(t *testing.T, f *fixture, marker string) string {
	t.Helper()
	for _, r := range slices.Backward(f.Stub.Requests()) {
		if !r.Side && strings.Contains(r.Prompt, marker) {
			return string(r.Body)
		}
	}
	t.Fatalf("the model endpoint saw no request for %q", marker)
	return ""
}

func hashWorkspace(t *testing.T, b vendors.Box) string {
	t.Helper()
	res, err := b.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
		"cd " + sandbox.Workspace + " && find . -type f | sort | xargs -r sha256sum | sha256sum"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("hash the workspace: %v %s", err, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// bearerWorks reports whether bearer opens the bridge of box b.
func bearerWorks(t *testing.T, b vendors.Box, bearer string) bool {
	t.Helper()
	resp := bridgeGet(t, b, "/v1/sessions", bearer)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func boxRunning(t *testing.T, b vendors.Box) vendors.State {
	t.Helper()
	st, err := b.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

// TestProvider_LiveSuspendResume runs suspend/resume cycles with a turn of
// one session between each: the workspace is byte-identical after every
// resume, every earlier run replays its events unchanged, the old bearer
// opens nothing, and the model sees every earlier turn in each request.
func TestProvider_LiveSuspendResume(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tg := range suspendTargets(t, f) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			suspendResume(t, f, tg)
		})
	}
}

func suspendResume(t *testing.T, f *fixture, tg target) {
	rec := &events{}
	// The active budget covers every cycle's running time (a 100-cycle
	// run takes more than the default 10 minutes of it), within what the
	// vendor allows (the E2B emulator's sandboxes run at most an hour).
	life := 2 * time.Hour
	if tg.Name == "e2b" {
		life = 25 * time.Minute
	}
	p := f.On(t, tg, suspendable(f, rec, func(o *sandbox.Options) { o.Lifetime = life }))
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	ctx := t.Context()
	if _, err := env.Box().Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c",
		"head -c 65536 /dev/urandom > blob && mkdir -p sub && echo kept > sub/file"}, Dir: sandbox.Workspace}); err != nil {
		t.Fatal(err)
	}
	hash := hashWorkspace(t, env.Box())
	const ses = "suspend-ses"
	mark := func(i int) string { return fmt.Sprintf("turn-marker-%03d", i) }
	type run struct {
		ref    provider.Reference
		events []string
	}
	var runs []run
	cycles := suspendCycles(t)
	var suspendTook, resumeTook []time.Duration
	for i := range cycles {
		ref, _ := sessionTurn(t, env, ses, mark(i))
		runs = append(runs, run{ref, rawReplay(t, env, ref.ControlRef.RunID)})
		if i > 0 {
			body := mainRequest(t, f, mark(i))
			for j := range i {
				if !strings.Contains(body, mark(j)) {
					t.Fatalf("cycle %d: the model's request lacks the earlier turn %q: the session forgot it", i, mark(j))
				}
			}
		}
		old := env.Reference()
		start := time.Now()
		sref, err := env.Suspend(ctx, sandbox.SuspendOptions{})
		if err != nil {
			t.Fatalf("cycle %d: Suspend: %v", i, err)
		}
		suspendTook = append(suspendTook, time.Since(start))
		if st := boxRunning(t, env.Box()); st != vendors.StateSuspended {
			t.Fatalf("cycle %d: box is %s after Suspend, want suspended (not running)", i, st)
		}
		if sref.Bearer != "" || strings.Contains(fmt.Sprint(sref), old.Bearer) {
			t.Fatal("the suspended reference carries the bearer")
		}
		start = time.Now()
		env, err = p.Resume(ctx, sref)
		if err != nil {
			t.Fatalf("cycle %d: Resume: %v", i, err)
		}
		resumeTook = append(resumeTook, time.Since(start))
		now := env.Reference()
		if now.Bearer == old.Bearer || bearerWorks(t, env.Box(), old.Bearer) || !bearerWorks(t, env.Box(), now.Bearer) {
			t.Fatalf("cycle %d: after Resume the old bearer still opens the bridge, or the new one does not", i)
		}
		if got := hashWorkspace(t, env.Box()); got != hash {
			t.Fatalf("cycle %d: workspace hash %s after resume, want %s", i, got, hash)
		}
		for _, r := range runs {
			if got := rawReplay(t, env, r.ref.ControlRef.RunID); !slices.Equal(got, r.events) {
				t.Fatalf("cycle %d: run %s replays %d events, want the %d it had:\n%v\n%v", i, r.ref.ControlRef.RunID, len(got), len(r.events), got, r.events)
			}
		}
	}
	if n, m := rec.count(sandbox.EventSuspended, sandbox.ReasonUser), rec.count(sandbox.EventResumed, ""); n != cycles || m != cycles {
		t.Errorf("events: %d suspended, %d resumed, want %d each", n, m, cycles)
	}
	t.Logf("%s: %d cycles: suspend p50 %v, resume to ready p50 %v", tg.Name, cycles, sandboxtest.Quantile(suspendTook, 0.5), sandboxtest.Quantile(resumeTook, 0.5))
	// The last resumed environment is the one to destroy.
	t.Cleanup(func() { _ = env.Destroy(context.WithoutCancel(ctx)) })
}

// TestProvider_LiveSuspendBusy refuses a suspend while a turn is live.
func TestProvider_LiveSuspendBusy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tg := range suspendTargets(t, f) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			suspendBusy(t, f, tg)
		})
	}
}

// suspendTargets are the vendors the suspend tests run on: Docker, the
// Daytona and E2B emulators, and Kubernetes.
func suspendTargets(t *testing.T, f *fixture) []target {
	return []target{f.Docker(), sandboxtest.DaytonaTarget(t, f), sandboxtest.E2BTarget(t, f), sandboxtest.KubernetesTarget(t, f)}
}

func suspendBusy(t *testing.T, f *fixture, tg target) {
	p := f.On(t, tg, suspendable(f, &events{}, nil))
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	if _, err := env.Dispatch(t.Context(), provider.Turn{Prompt: promptStall}); err != nil {
		t.Fatal(err)
	}
	_, err := env.Suspend(t.Context(), sandbox.SuspendOptions{})
	var ce *provider.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Suspend during a live turn = %v, want a *provider.ConflictError", err)
	}
	if st := boxRunning(t, env.Box()); st != vendors.StateRunning {
		t.Errorf("box is %s after a refused suspend, want running", st)
	}
	if _, err := env.Suspend(t.Context(), sandbox.SuspendOptions{CancelLive: true}); err != nil {
		t.Fatalf("Suspend with CancelLive: %v", err)
	}
}

// TestProvider_LiveIdleSuspend: a box polled for its health every 200ms
// still suspends once it had no turn for IdleSuspend.
func TestProvider_LiveIdleSuspend(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rec := &events{}
	p := f.Provider(t, suspendable(f, rec, func(o *sandbox.Options) { o.IdleSuspend = 3 * time.Second }))
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	sessionTurn(t, env, "idle-ses", "idle-turn")
	endpoint := env.Reference().Endpoint
	polls := 0
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, ok := env.Suspended(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the box did not suspend within 2m of idleness (%d health polls)", polls)
		}
		if resp, err := http.Get(endpoint + "/health"); err == nil {
			resp.Body.Close()
			polls++
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(200 * time.Millisecond): // the passive traffic's pace
		}
	}
	if polls < 10 {
		t.Errorf("only %d health polls before the idle suspend: the test shows nothing", polls)
	}
	if st := boxRunning(t, env.Box()); st != vendors.StateSuspended {
		t.Errorf("box is %s after the idle suspend, want suspended", st)
	}
	if n := rec.count(sandbox.EventSuspended, sandbox.ReasonIdle); n != 1 {
		t.Errorf("%d idle suspended events, want 1", n)
	}
}

// TestProvider_LiveFork makes two boxes of a suspended box's disk, on
// each vendor that forks (forkTargets): each has its own bearer and the
// source's workspace, byte-identical, and continues the session on its
// own, as the source does.
func TestProvider_LiveFork(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tg := range forkTargets(t, f) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			liveFork(t, f, tg)
		})
	}
}

// forkTargets are the vendors the fork tests run on: Docker, both
// emulators and Kubernetes.
func forkTargets(t *testing.T, f *fixture) []target {
	return []target{f.Docker(), sandboxtest.DaytonaTarget(t, f), sandboxtest.E2BTarget(t, f), sandboxtest.KubernetesTarget(t, f)}
}

func liveFork(t *testing.T, f *fixture, tg target) {
	p := f.On(t, tg, suspendable(f, &events{}, nil))
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	if _, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
		"head -c 65536 /dev/urandom > blob && mkdir -p sub && echo kept > sub/file"}, Dir: sandbox.Workspace}); err != nil {
		t.Fatal(err)
	}
	hash := hashWorkspace(t, env.Box())
	ses := "fork-ses-" + tg.Name
	origin := "fork-origin-marker-" + tg.Name
	sessionTurn(t, env, ses, origin)
	forks, self, err := env.Fork(t.Context(), 2)
	for _, e := range append(slices.Clone(forks), self) {
		if e != nil {
			t.Cleanup(func() { _ = e.Destroy(context.WithoutCancel(t.Context())) })
		}
	}
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	bearers := map[string]bool{self.Reference().Bearer: true}
	marker := func(i int) string { return fmt.Sprintf("fork-%d-marker-%s", i, tg.Name) }
	for i, fe := range forks {
		bearers[fe.Reference().Bearer] = true
		if fe.Box().ID() == self.Box().ID() {
			t.Fatalf("fork %d is the source box", i)
		}
		if got := hashWorkspace(t, fe.Box()); got != hash {
			t.Errorf("fork %d's workspace hash %s, want the source's %s", i, got, hash)
		}
		sessionTurn(t, fe, ses, marker(i))
		body := mainRequest(t, f, marker(i))
		if !strings.Contains(body, origin) || (i == 1 && strings.Contains(body, marker(0))) {
			t.Errorf("fork %d's turn: the model's request lacks the origin turn, or holds the other fork's", i)
		}
	}
	if len(bearers) != 3 {
		t.Errorf("%d distinct bearers among the source and 2 forks, want 3", len(bearers))
	}
	const after = "fork-source-after-marker"
	sessionTurn(t, self, ses, after+"-"+tg.Name)
	if body := mainRequest(t, f, after+"-"+tg.Name); !strings.Contains(body, origin) || strings.Contains(body, marker(0)) || strings.Contains(body, marker(1)) {
		t.Error("the source's turn after the fork: the model's request lacks the origin turn, or holds a fork's")
	}
}

// TestProvider_LiveGCIdleSuspend: a box made with IdleSuspend and left by
// its caller, as `boxctl up` leaves it, is suspended by SuspendIdle (what
// `boxctl gc` runs) once its bridge had no turn for that long, though its
// /health is polled every second: not while a turn is live, and not
// before the threshold after the turn's end. It is the suspend `boxctl
// suspend` makes: the box resumes and its session continues.
func TestProvider_LiveGCIdleSuspend(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rec := &events{}
	const after = 3 * time.Second
	p := f.Provider(t, suspendable(f, rec, func(o *sandbox.Options) { o.IdleSuspend = after }))
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	ctx := t.Context()
	const ses = "gc-idle-ses"
	sessionTurn(t, env, ses, "gc-idle-origin")
	stall := promptStall + " " + randText()
	live, err := env.Dispatch(ctx, provider.Turn{Prompt: stall})
	if err != nil {
		t.Fatal(err)
	}
	ref := env.Reference()
	// The caller goes: no process watches the box any more.
	if err := env.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var polls atomic.Int64
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-pollCtx.Done():
				return
			case <-tick.C:
			}
			if resp, err := http.Get(ref.Endpoint + "/health"); err == nil {
				resp.Body.Close()
				polls.Add(1)
			}
		}
	}()
	gc := func() []sandbox.IdleSuspended {
		t.Helper()
		got, err := sandbox.SuspendIdle(ctx, f.Vendor, sandbox.IdleOptions{Filter: map[string]string{boxmeta.LabelRunTag: p.RunTag()}, OnEvent: rec.add})
		if err != nil {
			t.Fatalf("SuspendIdle: %v", err)
		}
		return got
	}
	polltest.Until(t, time.Minute, "the stalled turn to reach the model", func() bool { return f.SawPrompt(stall) })
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	pace := func() {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
	}
	// Twice the threshold with a live turn: gc leaves the box running.
	for end := time.Now().Add(2 * after); time.Now().Before(end); pace() {
		if got := gc(); len(got) != 0 {
			t.Fatalf("gc suspended the box during a live turn: %+v", got)
		}
	}
	if st := boxRunning(t, env.Box()); st != vendors.StateRunning {
		t.Fatalf("box is %s during a live turn, want running", st)
	}
	other, err := p.Connect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	s, err := other.Session(live.ID, provider.SessionOptions{ControlRef: &live.ControlRef})
	if err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	if st, err := s.Cancel(ctx); err != nil || !st.Terminal {
		t.Fatalf("Cancel = %+v, %v; want the turn ended", st, err)
	}
	_ = other.Close(ctx)
	var got []sandbox.IdleSuspended
	polltest.Until(t, 2*time.Minute, "gc to suspend the idle box", func() bool {
		got = gc()
		return len(got) > 0
	})
	took := time.Since(cancelled)
	stopPolls()
	if len(got) != 1 || got[0].Box.ID != env.Box().ID() || got[0].Err != nil || got[0].Idle < after || got[0].After != after {
		t.Fatalf("gc = %+v, want the box suspended once idle %v", got, after)
	}
	if took < after {
		t.Errorf("gc suspended the box %v after its turn's end, before its threshold %v", took, after)
	}
	if n := polls.Load(); n < int64(2*after/time.Second) {
		t.Errorf("only %d health polls before the idle suspend: the test shows nothing", n)
	}
	if st := boxRunning(t, env.Box()); st != vendors.StateSuspended {
		t.Errorf("box is %s after gc's idle suspend, want suspended", st)
	}
	if n := rec.count(sandbox.EventSuspended, sandbox.ReasonIdle); n != 1 {
		t.Errorf("%d idle suspended events, want 1", n)
	}
	if again := gc(); len(again) != 0 {
		t.Errorf("a second gc suspended %+v again", again)
	}
	resumed, err := p.Resume(ctx, sandbox.NewSuspendedRef(ref, got[0].Suspended))
	if err != nil {
		t.Fatalf("Resume after gc's idle suspend: %v", err)
	}
	defer resumed.Close(context.WithoutCancel(ctx))
	sessionTurn(t, resumed, ses, "gc-idle-resumed")
	if body := mainRequest(t, f, "gc-idle-resumed"); !strings.Contains(body, "gc-idle-origin") {
		t.Error("the turn after the resume: the model's request lacks the earlier turn: the session forgot it")
	}
	t.Logf("suspended by gc %v after the turn's end (threshold %v), %d health polls", took.Round(time.Millisecond), after, polls.Load())
}
