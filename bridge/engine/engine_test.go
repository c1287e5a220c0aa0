package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tangle-network/boxctl/bridge/harness/claude"
	"github.com/tangle-network/boxctl/bridge/internal/bridgetest"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/polltest"
)

const routerKey = "rk-very-secret-key"

type fixture struct {
	e       *Engine
	st      *store.Store
	backend *Backend
	dir     string
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "data"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts.DataDir = filepath.Join(dir, "data")
	opts.RouterKey = routerKey
	opts.RouterURL = "http://127.0.0.1:1"
	e, err := New(context.Background(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
	})
	return &fixture{e: e, st: st, dir: dir, backend: &Backend{Adapter: claude.Adapter{}, Bin: bridgetest.FakeClaude(t)}}
}

func (f *fixture) start(t *testing.T, id, prompt string, mod ...func(*StartRequest)) store.Run {
	t.Helper()
	req := f.request(id, prompt)
	for _, m := range mod {
		m(&req)
	}
	run, created, err := f.e.Start(context.Background(), req)
	if err != nil || !created {
		t.Fatalf("Start(%s) = %v, created %v, want a new run", id, err, created)
	}
	return run
}

func (f *fixture) request(id, prompt string) StartRequest {
	content, _ := json.Marshal(prompt)
	return StartRequest{RunID: id, Digest: "sha256:" + id + prompt, Backend: f.backend, Model: "sonnet",
		ModelID: "claude-code/sonnet", SessionID: "ses-" + id,
		Messages: []wire.Message{{Role: "user", Content: content}}}
}

// readAll follows a run to its end and returns its frames.
func readAll(t *testing.T, e *Engine, id string, after int64) []string {
	t.Helper()
	r := e.NewReader(id, after)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	want := after + 1
	for {
		evs, err := r.Next(ctx)
		if errors.Is(err, ErrEnd) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		for _, ev := range evs {
			if ev.Seq != want {
				t.Fatalf("event seq = %d, want %d", ev.Seq, want)
			}
			want++
			out = append(out, string(ev.Data))
		}
	}
}

func waitRun(t *testing.T, f *fixture, id string) store.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !f.e.Wait(ctx, id) {
		t.Fatalf("run %s did not end", id)
	}
	r, err := f.st.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEngine_Hello(t *testing.T) {
	f := newFixture(t, Options{})
	f.start(t, "r1", "hello")
	frames := readAll(t, f.e, "r1", 0)
	var text string
	var last wire.Chunk
	for _, fr := range frames {
		var c wire.Chunk
		if err := json.Unmarshal([]byte(fr), &c); err != nil {
			t.Fatalf("frame %q: %v", fr, err)
		}
		if c.ID != "chatcmpl-r1" || c.Object != wire.ChunkObject || c.Model != "claude-code/sonnet" {
			t.Errorf("chunk header = %q %q %q", c.ID, c.Object, c.Model)
		}
		if len(c.Choices) > 0 {
			text += c.Choices[0].Delta.Content
		}
		last = c
	}
	if text != "Hello, world" {
		t.Errorf("text = %q, want %q", text, "Hello, world")
	}
	if len(last.Choices) != 1 || last.Choices[0].FinishReason == nil || *last.Choices[0].FinishReason != "stop" {
		t.Fatalf("last chunk = %s, want finish_reason stop", frames[len(frames)-1])
	}
	f0 := false
	wantUsage := &wire.Usage{PromptTokens: 15, CompletionTokens: 7, TotalTokens: 22,
		CacheReadInputTokens: ptr(int64(3)), CacheWriteInputTokens: ptr(int64(0)), CostScope: wire.CostScopeTotal, Estimated: &f0}
	if diff := cmp.Diff(wantUsage, last.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"fake-model-1"}, last.ProviderModels); diff != "" {
		t.Errorf("provider_models (-want +got):\n%s", diff)
	}
	r := waitRun(t, f, "r1")
	if r.Status != store.StatusDone || r.LastSeq != int64(len(frames)) || r.PGID == 0 {
		t.Errorf("run = status %s last %d pgid %d, want done, %d, a pgid", r.Status, r.LastSeq, r.PGID, len(frames))
	}
	if native, err := f.st.NativeSession(context.Background(), "ses-r1", "claude-code"); err != nil || native == "" {
		t.Errorf("NativeSession = %q, %v, want the harness session id", native, err)
	}
	// Replay from a cursor gives the tail, identically.
	if diff := cmp.Diff(frames[2:], readAll(t, f.e, "r1", 2)); diff != "" {
		t.Errorf("replay after 2 (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

func TestEngine_Identity(t *testing.T) {
	f := newFixture(t, Options{})
	f.start(t, "r1", "hello")
	if _, created, err := f.e.Start(context.Background(), f.request("r1", "hello")); err != nil || created {
		t.Errorf("Start(same id, same request) = created %v, %v, want attach", created, err)
	}
	waitRun(t, f, "r1")
	if _, created, err := f.e.Start(context.Background(), f.request("r1", "hello")); err != nil || created {
		t.Errorf("Start(same id, same request, terminal) = created %v, %v, want attach", created, err)
	}
	if _, _, err := f.e.Start(context.Background(), f.request("r1", "other")); !errors.Is(err, ErrIdentityConflict) {
		t.Errorf("Start(same id, other request) = %v, want ErrIdentityConflict", err)
	}
}

func lastError(t *testing.T, frames []string) wire.ErrorBody {
	t.Helper()
	if len(frames) == 0 {
		t.Fatal("no frames")
	}
	var e wire.ErrorResponse
	if err := json.Unmarshal([]byte(frames[len(frames)-1]), &e); err != nil || e.Error.Type == "" {
		t.Fatalf("last frame = %s, want an error frame", frames[len(frames)-1])
	}
	return e.Error
}

func TestEngine_Faults(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		prompt     string
		bin        string
		timeout    time.Duration
		wantStatus string
		wantType   string
		wantMsg    []string
		maxTime    time.Duration
	}{
		{name: "crash", prompt: "crash", wantStatus: store.StatusError, wantType: wire.TypeHarnessError,
			wantMsg: []string{"status 3", "lost connection", "[redacted]"}},
		{name: "stall", opts: Options{IdleTimeout: 300 * time.Millisecond}, prompt: "stall",
			wantStatus: store.StatusError, wantType: wire.TypeHarnessStalled, wantMsg: []string{"printed nothing"}},
		{name: "deadline", prompt: "slow:100:50", timeout: 300 * time.Millisecond,
			wantStatus: store.StatusError, wantType: wire.TypeHarnessTimeout, wantMsg: []string{"deadline"}},
		{name: "hang after result", opts: Options{ResultGrace: 200 * time.Millisecond}, prompt: "hang-after-result",
			wantStatus: store.StatusDone, maxTime: 5 * time.Second},
		{name: "is_error", prompt: "is-error", wantStatus: store.StatusError, wantType: wire.TypeHarnessError,
			wantMsg: []string{"529"}},
		{name: "missing binary", prompt: "hello", bin: "/nonexistent/claude", wantStatus: store.StatusError,
			wantType: wire.TypeHarnessUnavailable, wantMsg: []string{"/nonexistent/claude"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			if tt.bin != "" {
				f.backend.Bin = tt.bin
			}
			f.backend.Timeout = tt.timeout
			begin := time.Now()
			f.start(t, "r", tt.prompt)
			frames := readAll(t, f.e, "r", 0)
			r := waitRun(t, f, "r")
			if tt.maxTime > 0 && time.Since(begin) > tt.maxTime {
				t.Errorf("run took %s, want under %s", time.Since(begin), tt.maxTime)
			}
			if r.Status != tt.wantStatus || r.ErrType != tt.wantType {
				t.Fatalf("run = %s/%s (%s), want %s/%s", r.Status, r.ErrType, r.ErrMessage, tt.wantStatus, tt.wantType)
			}
			if tt.wantType == "" {
				return
			}
			e := lastError(t, frames)
			if e.Type != tt.wantType {
				t.Errorf("error frame type = %q, want %q", e.Type, tt.wantType)
			}
			for _, want := range tt.wantMsg {
				if !strings.Contains(e.Message, want) {
					t.Errorf("error message = %q, want it to contain %q", e.Message, want)
				}
			}
			if strings.Contains(strings.Join(frames, ""), routerKey) || strings.Contains(r.ErrMessage, routerKey) {
				t.Errorf("the router key leaked into the run's events or error")
			}
		})
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

func readPIDs(t *testing.T, file string) []int {
	t.Helper()
	var b []byte
	polltest.Until(t, 10*time.Second, file+" to be written", func() bool {
		var err error
		b, err = os.ReadFile(file)
		return err == nil && len(b) > 0
	})
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		p, _ := strconv.Atoi(s)
		pids = append(pids, p)
	}
	return pids
}

func TestEngine_CancelKillsGroup(t *testing.T) {
	f := newFixture(t, Options{KillGrace: 300 * time.Millisecond})
	pidfile := filepath.Join(f.dir, "pids")
	f.start(t, "r", "stubborn", func(r *StartRequest) { r.Env = map[string]string{"FAKE_PIDFILE": pidfile} })
	pids := readPIDs(t, pidfile)
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d not alive before cancel", p)
		}
	}
	if readers, cancelling, ok := f.e.Live("r"); !ok || cancelling || readers != 0 {
		t.Errorf("Live = %d, %v, %v, want live, not cancelling, no readers", readers, cancelling, ok)
	}
	requested, err := f.e.Cancel(context.Background(), "r")
	if err != nil || !requested {
		t.Fatalf("Cancel = %v, %v, want requested", requested, err)
	}
	if again, _ := f.e.Cancel(context.Background(), "r"); again && f.e.LiveCount() > 0 {
		t.Errorf("second Cancel reported a first request")
	}
	r := waitRun(t, f, "r")
	if r.Status != store.StatusCancelled || r.CancelRequestedAt.IsZero() {
		t.Errorf("run = %s, cancel requested %v, want cancelled", r.Status, r.CancelRequestedAt)
	}
	for _, p := range pids {
		polltest.Until(t, 5*time.Second, fmt.Sprintf("pid %d to end with the cancel", p), func() bool { return !alive(p) })
	}
	if e := lastError(t, readAll(t, f.e, "r", 0)); e.Type != wire.TypeRunCancelled {
		t.Errorf("last frame type = %q, want run_cancelled", e.Type)
	}
	if requested, _ := f.e.Cancel(context.Background(), "r"); requested {
		t.Error("Cancel(terminal run) = requested, want not")
	}
}

// TestEngine_StdoutHeldOutsideTheGroup runs a harness that leaves a
// process of another session holding its stdout open: the run still ends
// (done) once the harness exits and ResultGrace passes, and the bridge
// stops reading the pipe.
func TestEngine_StdoutHeldOutsideTheGroup(t *testing.T) {
	f := newFixture(t, Options{ResultGrace: 200 * time.Millisecond})
	pidfile := filepath.Join(f.dir, "orphan")
	f.start(t, "r", "orphan", func(r *StartRequest) { r.Env = map[string]string{"FAKE_PIDFILE": pidfile} })
	orphan := readPIDs(t, pidfile)[0]
	t.Cleanup(func() { syscall.Kill(orphan, syscall.SIGKILL) })
	r := waitRun(t, f, "r")
	if r.Status != store.StatusDone {
		t.Fatalf("run = %s/%s (%s), want done", r.Status, r.ErrType, r.ErrMessage)
	}
	if !alive(orphan) {
		t.Fatalf("the orphan (pid %d) is gone: the case did not hold stdout open", orphan)
	}
}

// TestEngine_CancelWinsOverItsError cancels a run whose harness answers
// SIGTERM by ending its turn with an error: the run reads cancelled, not
// the error the cancel caused.
func TestEngine_CancelWinsOverItsError(t *testing.T) {
	f := newFixture(t, Options{KillGrace: 5 * time.Second})
	f.start(t, "r", "graceful")
	// The harness printed its text, so it is listening for SIGTERM.
	rd := f.e.NewReader("r", 0)
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rd.Next(ctx); err != nil {
		t.Fatalf("first events: %v", err)
	}
	if requested, err := f.e.Cancel(context.Background(), "r"); err != nil || !requested {
		t.Fatalf("Cancel = %v, %v, want requested", requested, err)
	}
	r := waitRun(t, f, "r")
	if r.Status != store.StatusCancelled || r.ErrType != wire.TypeRunCancelled {
		t.Errorf("run = %s %s (%s), want cancelled", r.Status, r.ErrType, r.ErrMessage)
	}
	if e := lastError(t, readAll(t, f.e, "r", 0)); e.Type != wire.TypeRunCancelled {
		t.Errorf("last frame type = %q, want run_cancelled", e.Type)
	}
}

func TestEngine_Admission(t *testing.T) {
	f := newFixture(t, Options{MaxRuns: 1})
	f.start(t, "a", "stall")
	if _, _, err := f.e.Start(context.Background(), f.request("b", "hello")); !errors.Is(err, ErrSaturated) {
		t.Errorf("Start over MaxRuns = %v, want ErrSaturated", err)
	}
	f.e.Cancel(context.Background(), "a")
	waitRun(t, f, "a")
	f.start(t, "b", "hello")
	waitRun(t, f, "b")

	f2 := newFixture(t, Options{})
	f2.start(t, "a", "stall", func(r *StartRequest) { r.SessionID = "s" })
	if _, _, err := f2.e.Start(context.Background(), f2.request("b", "hello")); err != nil {
		t.Errorf("Start(other session) = %v, want ok", err)
	}
	req := f2.request("c", "hello")
	req.SessionID = "s"
	if _, _, err := f2.e.Start(context.Background(), req); !errors.Is(err, ErrSessionBusy) {
		t.Errorf("Start(busy session) = %v, want ErrSessionBusy", err)
	}
}

func TestEngine_SlowReaderDoesNotBlock(t *testing.T) {
	f := newFixture(t, Options{})
	f.start(t, "r", "many:3000")
	slow := f.e.NewReader("r", 0)
	defer slow.Close()
	ctx := context.Background()
	first, err := slow.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The run ends while the slow reader sits on its first page.
	r := waitRun(t, f, "r")
	if r.Status != store.StatusDone || r.LastSeq != 3001 {
		t.Fatalf("run = %s last %d, want done with 3001 events", r.Status, r.LastSeq)
	}
	fast := readAll(t, f.e, "r", 0)
	got := len(first)
	for {
		evs, err := slow.Next(ctx)
		if errors.Is(err, ErrEnd) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got += len(evs)
	}
	if got != 3001 || len(fast) != 3001 {
		t.Errorf("slow reader got %d, fast %d, want 3001 each", got, len(fast))
	}
}

func TestEngine_RecoverEndsLeftovers(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	st, err := store.Open(context.Background(), data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	marker := MarkerVar + "=orphan"
	if _, _, err := st.CreateRun(ctx, store.Run{ID: "orphan", Digest: "d", Harness: "claude-code", Model: "m", Marker: marker}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "orphan", [][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`)}); err != nil {
		t.Fatal(err)
	}
	// A harness left behind by a previous incarnation, with a child.
	pidfile := filepath.Join(dir, "pids")
	cmd := exec.Command(bridgetest.FakeClaude(t), "-p", "stubborn")
	cmd.Env = append(os.Environ(), marker, "FAKE_PIDFILE="+pidfile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	pids := readPIDs(t, pidfile)
	if err := st.SetRunProcess(ctx, "orphan", store.RunProcess{PGID: cmd.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	// An unrelated process in its own group must survive.
	bystander := exec.Command("sleep", "30")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })

	e, err := New(ctx, st, Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphan harness was not killed")
	}
	for _, p := range pids[1:] {
		polltest.Until(t, 5*time.Second, fmt.Sprintf("orphan child %d to end with the restart", p), func() bool { return !alive(p) })
	}
	if !alive(bystander.Process.Pid) {
		t.Error("an unrelated process was killed")
	}
	r, err := st.GetRun(ctx, "orphan")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.StatusError || r.ErrType != wire.TypeBridgeRestarted || !strings.Contains(r.ErrMessage, "restarted") {
		t.Errorf("run = %s/%s %q, want error/bridge_restarted", r.Status, r.ErrType, r.ErrMessage)
	}
	frames := readAll(t, e, "orphan", 0)
	if len(frames) != 3 || frames[0] != `{"a":1}` || lastError(t, frames).Type != wire.TypeBridgeRestarted {
		t.Errorf("frames = %q, want the two stored events and a bridge_restarted error", frames)
	}
}

func TestEngine_CloseStopsRuns(t *testing.T) {
	f := newFixture(t, Options{})
	f.start(t, "r", "stall")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := f.st.GetRun(ctx, "r")
	if r.Status != store.StatusError || r.ErrType != wire.TypeBridgeShutdown {
		t.Errorf("run = %s/%s, want error/bridge_shutdown", r.Status, r.ErrType)
	}
	if _, _, err := f.e.Start(ctx, f.request("x", "hello")); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

// TestEngine_Hold: with Options.Hold, a reader of a live run gets events
// only through the one its hold returned for (a replica's
// acknowledgement), however many the run committed meanwhile, never
// holds the run back, and still reads the run whole; NextFunc too.
func TestEngine_Hold(t *testing.T) {
	for _, paged := range []bool{false, true} {
		var mu sync.Mutex
		acked := map[string]int64{} // what the hold let through, by run
		hold := func(_ context.Context, run string, through int64) {
			<-time.After(2 * time.Millisecond) // a replica's round trip: more commits meanwhile
			mu.Lock()
			acked[run] = max(acked[run], through)
			mu.Unlock()
		}
		f := newFixture(t, Options{Hold: hold})
		f.start(t, "r", "slow:200:1")
		r := f.e.NewReader("r", 0)
		var got, ahead int64
		for {
			var last int64
			var err error
			if paged {
				err = r.NextFunc(t.Context(), 1<<20, func(seq int64, _ []byte) { last = seq; got++ })
			} else {
				var evs []store.Event
				if evs, err = r.Next(t.Context()); err == nil {
					last, got = evs[len(evs)-1].Seq, got+int64(len(evs))
				}
			}
			if errors.Is(err, ErrEnd) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			if last > acked["r"] {
				ahead++
			}
			mu.Unlock()
		}
		r.Close()
		run := waitRun(t, f, "r")
		if got != run.LastSeq || ahead != 0 {
			t.Errorf("paged %v: read %d of %d events, %d pages ahead of the hold", paged, got, run.LastSeq, ahead)
		}
	}
}
