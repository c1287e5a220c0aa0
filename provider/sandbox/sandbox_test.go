package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// The fixture the live tests share (internal/sandboxtest).
type (
	fixture = sandboxtest.Fixture
	target  = sandboxtest.Target
)

const (
	replyText   = sandboxtest.ReplyText
	promptStall = sandboxtest.PromptStall
	promptPaced = sandboxtest.PromptPaced
	pacedText   = sandboxtest.PacedText
	servedModel = sandboxtest.ServedModel
	testNetwork = sandboxtest.Network
)

var (
	setup         = sandboxtest.Setup
	randText      = sandboxtest.RandText
	assertNoBoxes = sandboxtest.AssertNoBoxes
	claude        = sandboxtest.Claude
)

func create(t *testing.T, p *sandbox.Provider, req sandbox.CreateRequest) *sandbox.Environment {
	t.Helper()
	start := time.Now()
	env, err := p.Create(t.Context(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("Create to a ready environment: %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.Destroy(ctx); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return env
}

func TestProvider_LiveTurn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tg := range f.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			liveTurn(t, f, tg)
		})
	}
}

func liveTurn(t *testing.T, f *fixture, tg target) {
	var logs bytes.Buffer
	p := f.On(t, tg, func(o *sandbox.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.BridgeEnv = map[string]string{"BRIDGE_LOG_LEVEL": "debug"}
	})
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	ref := env.Reference()
	if left := time.Until(ref.Deadline); left <= 0 || left > 10*time.Minute+2*time.Second {
		t.Errorf("deadline %v is %v away, want within the lifetime", ref.Deadline, left)
	}

	text, evs, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if !strings.Contains(text, replyText) {
		t.Errorf("turn text = %q, want %q", text, replyText)
	}
	if evs[0].Type != provider.EventExecutionStarted || evs[0].Model != "claude-code/claude-sonnet-4-5" || evs[0].RunID == "" {
		t.Errorf("first event = %s model %q run %q, want execution.started with the declared model", evs[0].Type, evs[0].Model, evs[0].RunID)
	}
	var result *provider.Event
	for i := range evs {
		switch ev := &evs[i]; {
		case ev.Type == provider.EventResult || (ev.Type == provider.EventStatus && ev.Status == provider.StatusCompleted):
			result = ev
		}
	}
	if result == nil {
		t.Fatalf("no terminal result in %d events", len(evs))
	}
	var served []string
	var usage *provider.Usage
	for _, ev := range evs {
		if len(ev.ProviderModels) > 0 {
			served = ev.ProviderModels
		}
		if ev.Usage != nil {
			usage = ev.Usage
			if ev.Usage.Cost != nil || strings.Contains(string(ev.Raw), `"cost"`) {
				t.Errorf("usage carries a cost: %s", ev.Raw)
			}
		}
	}
	if len(served) == 0 || served[0] != servedModel {
		t.Errorf("served models = %v, want %s", served, servedModel)
	}
	if usage == nil {
		t.Error("no usage reported")
	}

	// No process in the box can read the bearer: not the agent's harness,
	// not a command it runs as the box's user.
	res, err := env.Box().Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
		`for p in /proc/[0-9]*; do cat "$p/environ" "$p/cmdline" 2>/dev/null; done | tr '\0' '\n'`}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("read /proc in the box: %v %s", err, res.Stderr)
	}
	if len(res.Stdout) == 0 {
		t.Fatal("read /proc in the box: nothing readable, so the check checks nothing")
	}
	if strings.Contains(string(res.Stdout), ref.Bearer) {
		t.Error("a process of the box's user can read the bearer in /proc")
	}

	// Neither secret in the box's inspect data, any exec's, or any log.
	secrets := map[string]string{"bearer": ref.Bearer, "router key": f.Router.Key}
	raw := ""
	if tg.Inspect != nil {
		raw = tg.Inspect(t, env.Box().ID())
	}
	stdout, stderr := bridgeLog(t, env)
	for name, s := range secrets {
		if strings.Contains(raw, s) {
			t.Errorf("the %s appears in the engine's inspect data", name)
		}
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("the %s appears in the bridge's log", name)
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("the %s appears in the provider's debug log", name)
		}
		if strings.Contains(fmt.Sprint(ref)+fmt.Sprintf("%+v %#v %s", ref, ref, ref), s) {
			t.Errorf("the %s appears in the reference's printed form", name)
		}
	}
	if !strings.Contains(stderr+stdout, "level=") {
		t.Errorf("the bridge's log is empty or unreadable: %q", stderr)
	}
}

func bridgeLog(t *testing.T, env *sandbox.Environment) (string, string) {
	t.Helper()
	stdout, stderr, err := env.BridgeLog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return string(stdout), string(stderr)
}

func TestProvider_LiveControl(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tg := range f.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			liveControl(t, f, tg)
		})
	}
}

func liveControl(t *testing.T, f *fixture, tg target) {
	p := f.On(t, tg, nil)
	env := create(t, p, sandbox.CreateRequest{Profile: claude})

	t.Run("timeout", func(t *testing.T) {
		_, evs, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: promptStall, Timeout: 3 * time.Second})
		var te *provider.TimeoutError
		if !errors.As(err, &te) || te.Timeout != 3*time.Second {
			t.Fatalf("Stream past its timeout = %v, want a *provider.TimeoutError of 3s", err)
		}
		last := evs[len(evs)-1]
		if last.Status != provider.StatusFailed || !strings.Contains(last.Detail, "timeout") {
			t.Errorf("last event = %s %s %q, want a failed status naming the timeout", last.Type, last.Status, last.Detail)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		// Cancel once the model call of the turn is in flight.
		marker := promptStall + " " + randText()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			defer cancel()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for !f.SawPrompt(marker) {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
		_, _, err := sandboxtest.Turn(ctx, env, provider.Turn{Prompt: marker})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Stream after cancel = %v, want context.Canceled", err)
		}
	})
	t.Run("busy", func(t *testing.T) {
		ref, err := env.Dispatch(t.Context(), provider.Turn{Prompt: promptStall})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."})
		var ce *provider.ConflictError
		if !errors.As(err, &ce) {
			t.Errorf("a turn on a busy environment = %v, want a *provider.ConflictError", err)
		}
		s, err := env.Session(ref.ID, provider.SessionOptions{ControlRef: &ref.ControlRef})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Cancel(t.Context())
		if err != nil || st.Status != provider.StatusCancelled {
			t.Fatalf("Cancel = %+v, %v; want cancelled", st, err)
		}
		if text, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."}); err != nil || !strings.Contains(text, replyText) {
			t.Errorf("a turn after the cancel = %q, %v", text, err)
		}
	})
}

// The reconnect test and the abandoned-box test run a second process: this
// test binary with BOXCTL_SANDBOX_CHILD set creates a box and prints its
// reference.
const childVar = "BOXCTL_SANDBOX_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childVar); mode != "" {
		os.Exit(child(mode))
	}
	boxbridgetest.Main(m)
}

func child(mode string) int {
	p, err := sandboxtest.ChildProvider()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e, err := p.Create(context.Background(), sandbox.CreateRequest{Profile: claude})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(e.Reference()); err != nil {
		return 1
	}
	if mode == "hang" {
		select {} // until killed
	}
	if mode == "follow" {
		return follow(e)
	}
	return 0
}

// startChild starts a child process that creates a box with a fresh run
// tag (checked for leftovers at the end of t) and returns the child, the
// tag and the box's reference.
func startChild(t *testing.T, f *fixture, mode string, lifetime time.Duration) (*exec.Cmd, string, sandbox.Reference) {
	t.Helper()
	tag := sandbox.NewRunTag()
	t.Cleanup(func() { assertNoBoxes(t, f.Vendor, tag) })
	cmd, dec := execChild(t, f, mode, tag, lifetime)
	var ref sandbox.Reference
	if err := dec.Decode(&ref); err != nil {
		t.Fatalf("child printed no reference: %v", err)
	}
	return cmd, tag, ref
}

func execChild(t *testing.T, f *fixture, mode, tag string, lifetime time.Duration) (*exec.Cmd, *json.Decoder) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childVar+"="+mode), f.ChildEnv(tag, lifetime)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, json.NewDecoder(out)
}

func TestProvider_ReconnectAfterExit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cmd, tag, ref := startChild(t, f, "exit", 10*time.Minute)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	p := f.Provider(t, func(o *sandbox.Options) { o.RunTag = tag })
	env, err := p.Connect(t.Context(), ref)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = env.Destroy(context.WithoutCancel(t.Context())) })
	if env.ID() == "" || env.Reference().BoxID != ref.BoxID {
		t.Errorf("Connect = %s in box %s, want box %s", env.ID(), env.Reference().BoxID, ref.BoxID)
	}
	if text, _, err := sandboxtest.Turn(t.Context(), env, provider.Turn{Prompt: "Say hello."}); err != nil || !strings.Contains(text, replyText) {
		t.Fatalf("turn after reconnect = %q, %v", text, err)
	}
	if err := env.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	bad := ref
	bad.Bearer = "wrong"
	if e2, err := p.Connect(t.Context(), bad); err == nil {
		_ = e2.Close(t.Context())
		t.Error("Connect to a destroyed box succeeded")
	}
}

func TestProvider_AbandonedBoxEnds(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const life = 10 * time.Second
	cmd, _, ref := startChild(t, f, "hang", life)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := ref.Deadline.Add(15 * time.Second)
	polltest.Until(t, time.Until(deadline), "the abandoned box to end by itself", func() bool {
		_, err := f.Vendor.Connect(t.Context(), ref.BoxID)
		return errors.Is(err, vendors.ErrNotFound)
	})
}

func TestGC_RemovesOrphans(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cmd, tag, ref := startChild(t, f, "hang", 10*time.Minute)
	filter := map[string]string{boxmeta.LabelRunTag: tag}
	if reaped, err := sandbox.GC(t.Context(), f.Vendor, sandbox.GCOptions{Filter: filter}); err != nil || len(reaped) != 0 {
		t.Fatalf("GC while the owner lives = %+v, %v; want nothing", reaped, err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	dry, err := sandbox.GC(t.Context(), f.Vendor, sandbox.GCOptions{Filter: filter, DryRun: true})
	if err != nil || len(dry) != 1 || dry[0].Box.ID != ref.BoxID || dry[0].Reason != reaper.ReasonOwnerGone {
		t.Fatalf("GC dry run = %+v, %v; want the orphan", dry, err)
	}
	if _, err := f.Vendor.Connect(t.Context(), ref.BoxID); err != nil {
		t.Fatalf("the dry run removed the box: %v", err)
	}
	reaped, err := sandbox.GC(t.Context(), f.Vendor, sandbox.GCOptions{Filter: filter})
	if err != nil || len(reaped) != 1 || reaped[0].Err != nil {
		t.Fatalf("GC = %+v, %v", reaped, err)
	}
	if _, err := f.Vendor.Connect(t.Context(), ref.BoxID); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("the orphan remains after GC: %v", err)
	}
}

// TestProvider_ConcurrentCreates makes 20 environments at once on this
// machine, each a box with its bridge ready, and destroys them all.
func TestProvider_ConcurrentCreates(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := f.Provider(t, nil)
	const n = 20
	envs := make([]*sandbox.Environment, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { envs[i], errs[i] = p.Create(t.Context(), sandbox.CreateRequest{Profile: claude}) })
	}
	wg.Wait()
	t.Logf("%d concurrent creates to ready environments in %v", n, time.Since(start).Round(time.Millisecond))
	for i := range n {
		wg.Go(func() {
			if envs[i] != nil {
				if err := envs[i].Destroy(context.WithoutCancel(t.Context())); err != nil {
					t.Errorf("Destroy #%d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create #%d: %v", i, err)
		}
	}
}
