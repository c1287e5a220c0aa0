package inspector_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/inspector"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/docker"
	"github.com/tangle-network/boxctl/vendors/egress"
)

const (
	// replyText is the model's answer to a plain turn, streamed in deltas.
	replyText = "Hello from the inspector's box, streamed in four parts."
	// askPrompt makes the model call Claude Code's Bash tool, which asks
	// for permission; the call's result gets afterTool.
	askPrompt = "inspector permission probe"
	afterTool = "The probe file is written."
	probeFile = "inspector-probe.txt"
	// stallPrompt gets no answer from the model: a turn to cancel.
	stallPrompt = "inspector stall"
)

// probeScript is the program the permission probe's Bash call runs (Claude
// Code asks before it runs node, not before a plain file command): it
// writes the file its argument names.
const probeScript = `require("fs").writeFileSync(process.argv[2], "written by the inspector's probe\n");`

var (
	probePath = path.Join(sandbox.Workspace, ".inspector-probe.js")
	probeOut  = path.Join(sandbox.Workspace, probeFile)
)

// script answers side calls briefly, the permission probe with a Bash
// call that writes probeFile in the workspace, a tool result with
// afterTool, and anything else with replyText.
func script(r routerstub.Request) routerstub.Reply {
	switch {
	case r.Side:
		return routerstub.Text("side")
	case r.ToolResult:
		return routerstub.Text(afterTool)
	case strings.HasSuffix(r.Prompt, stallPrompt):
		return routerstub.Stall(10 * time.Minute)
	case strings.HasSuffix(r.Prompt, askPrompt):
		return routerstub.ToolCall("Bash", fmt.Sprintf(`{"command":"node %s %s","description":"inspector probe"}`, probePath, probeOut))
	}
	return routerstub.Deltas(replyText, 4)
}

// liveBox makes a real Claude Code box on the test bed's Docker engine,
// recorded in store as `boxctl up` records one, its model endpoint the
// local stub (router, which a resume takes again); the box is destroyed
// when the test ends.
func liveBox(t *testing.T, v *docker.Vendor, store *boxstate.Store) (boxstate.Record, *routerstub.Server, sandbox.Router) {
	t.Helper()
	img := boxtest.Image(t, boxtest.Options{})
	host, err := v.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	key := "router-key-" + strings.ToLower(sandbox.NewRunTag())
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: routerstub.ScriptFunc(script)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on the boxes' network: %v", err)
	}
	hs := &http.Server{Handler: stub}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	router := sandbox.Router{URL: "http://" + l.Addr().String(), Key: key}

	now := time.Now()
	// The box's network is open, and its record says so.
	open := egress.Policy{Open: true}
	rec := boxstate.Record{Target: docker.Name, Image: img, RunTag: sandbox.NewRunTag(), Created: now.UTC(), Deadline: now.Add(15 * time.Minute).UTC(),
		Egress: &open}
	rec, err = store.Create(t.Context(), v, rec, func(ctx context.Context, tag string) (sandbox.Reference, error) {
		p, err := sandbox.New(sandbox.Options{Vendor: v, Image: img, Router: router, Lifetime: 15 * time.Minute, RunTag: tag,
			Retention: time.Hour, Egress: &open,
			Owner: store.Owner(), OnEvent: store.Record})
		if err != nil {
			return sandbox.Reference{}, err
		}
		env, err := p.Create(ctx, sandbox.CreateRequest{Profile: provider.Profile{Harness: "claude-code",
			Model: provider.ProfileModel{Default: "claude-sonnet-4-5"}}})
		if err != nil {
			return sandbox.Reference{}, err
		}
		ref := env.Reference()
		_ = env.Close(context.WithoutCancel(ctx))
		return ref, nil
	})
	// Cleanups run last first: the box is destroyed, then none may be left.
	t.Cleanup(func() {
		left, err := v.List(context.Background(), map[string]string{boxmeta.LabelRunTag: rec.RunTag})
		if err != nil || len(left) > 0 {
			t.Errorf("boxes of run %s left: %d (%v)", rec.RunTag, len(left), err)
		}
	})
	t.Cleanup(func() {
		if rec.ID != "" {
			_ = boxstate.Destroy(context.Background(), v, rec.ID)
		}
	})
	if err != nil {
		t.Fatalf("create box: %v", err)
	}
	box, err := v.Connect(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Write(t.Context(), probePath, []byte(probeScript), 0o644); err != nil {
		t.Fatalf("write the probe in the box: %v", err)
	}
	return rec, stub, router
}

// TestInspector_InBrowser drives the inspector of a real Docker box from
// Debian's Chromium: the page lists the box, a turn's text streams in and
// its trace is read back from Jaeger, a permission prompt is answered in
// the page (and the tool ran), the lifecycle events show the turns, an
// earlier run replays, a stalled turn refuses a suspend (session_busy) and
// is cancelled, the box is suspended and resumed from the page and takes a
// turn after, and a destroyed box is
// gone from the list; a request without the token is refused. It logs the page's load
// and the first streamed event's time, and keeps a screenshot of the box
// page as an artifact.
func TestInspector_InBrowser(t *testing.T) {
	env := testbed.RequireChromium(t)
	testbed.RequireTracing(t)
	traceTo(t, env.OTLPEndpoint)
	v, err := docker.New(docker.WithHost(env.DockerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	store, err := boxstate.Open(boxstate.Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	rec, stub, router := liveBox(t, v, store)
	routerEnv := map[string]string{sandbox.RouterURLEnv: router.URL, sandbox.RouterKeyEnv: router.Key}

	srv, err := inspector.New(inspector.Options{Store: store, JaegerURL: env.JaegerURL,
		Vendor: func(string) (vendors.Vendor, error) { return v, nil }, Getenv: func(k string) string { return routerEnv[k] }})
	if err != nil {
		t.Fatal(err)
	}
	link := serve(t, srv)

	// Without the token's cookie, nothing is served.
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + u.Host + "/api/boxes")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), inspector.TypeUnauthenticated) {
		t.Fatalf("GET /api/boxes without the token = %d %s, want 401 %s", resp.StatusCode, body, inspector.TypeUnauthenticated)
	}

	b := newBrowser(t, env)
	row := fmt.Sprintf(`tr[data-box=%q]`, rec.ID)
	ended := `document.getElementById("turn-status").dataset.ended === "true"`

	// The list, through the one-time URL.
	start := time.Now()
	b.do("open the inspector", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(row)))
	loadWall := time.Since(start)
	type navTiming struct {
		DOMContentLoaded float64 `json:"domContentLoaded"`
		Load             float64 `json:"load"`
		Listed           float64 `json:"listed"`
	}
	nav := get(b, "read the navigation timing", chromedp.Evaluate[navTiming](`(() => { const n = performance.getEntriesByType("navigation")[0];
		return { domContentLoaded: n.domContentLoadedEventEnd, load: n.loadEventEnd, listed: window.inspector.loadedAt || 0 }; })()`))
	t.Logf("page load: %v from navigation to the box listed (wall); in the page: DOMContentLoaded %.1f ms, load %.1f ms, boxes listed %.1f ms",
		loadWall.Round(time.Millisecond), nav.DOMContentLoaded, nav.Load, nav.Listed)
	if state := get(b, "read the box's state", chromedp.Text(chromedp.CSS(row+" td.state"))); state != "running" {
		t.Errorf("the list shows the box %s, want running", state)
	}
	if pol := get(b, "read the box's egress", chromedp.Text(chromedp.CSS(row+" td.egress"))); pol != egress.Open {
		t.Errorf("the list shows the box's egress %q, want %q", pol, egress.Open)
	}
	b.noErrors("list")

	// A turn streams in.
	b.do("open the box page", chromedp.Click(chromedp.CSS(row+" a.box-link")), chromedp.WaitVisible(chromedp.CSS("#prompt")))
	start = time.Now()
	b.do("send a turn", chromedp.SetValue(chromedp.CSS("#prompt"), "Say hello."), chromedp.Click(chromedp.CSS("#send")))
	get(b, "wait for the first text", chromedp.Poll[bool](`document.getElementById("turn-text").textContent.length > 0`,
		chromedp.WithPollingTimeout(3*time.Minute)))
	firstWall := time.Since(start)
	firstMS := get(b, "read the first event's time", chromedp.Evaluate[float64](`window.inspector.firstEventAt - window.inspector.sentAt`))
	get(b, "wait for the turn's end", chromedp.Poll[bool](ended, chromedp.WithPollingTimeout(3*time.Minute)))
	t.Logf("first streamed event: %.1f ms in the page from the click on Send (%v wall to the first text shown)", firstMS, firstWall.Round(time.Millisecond))
	if text := get(b, "read the turn's text", chromedp.Text(chromedp.CSS("#turn-text"))); text != replyText {
		t.Errorf("the page streamed %q, want %q", text, replyText)
	}
	b.noErrors("turn")

	// The turn's trace: the inspector's span, the client's turn under it.
	run := get(b, "read the run", chromedp.Evaluate[string](`window.inspector.run`))
	b.do("show the trace", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#runs li[data-run=%q] button.show-trace`, run))))
	get(b, "wait for the spans", chromedp.Poll[bool](`document.querySelectorAll("#spans tr").length > 0`, chromedp.WithPollingTimeout(30*time.Second)))
	spans := get(b, "read the spans", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#spans tr td:first-child")].map(td => td.textContent)`))
	for _, want := range []string{"inspector.turn", "turn"} {
		if !slices.Contains(spans, want) {
			t.Errorf("the trace view shows spans %q, want %s among them", spans, want)
		}
	}

	// A permission prompt, answered in the page.
	b.within(3*time.Minute).do("send the permission probe", chromedp.SetValue(chromedp.CSS("#prompt"), askPrompt), chromedp.Click(chromedp.CSS("#send")),
		chromedp.WaitVisible(chromedp.CSS("#asks button.allow")))
	if ask := get(b, "read the prompt", chromedp.Text(chromedp.CSS("#asks .ask"))); !strings.Contains(ask, probeFile) {
		t.Errorf("the permission prompt reads %q, want it to name the command (%s)", ask, probeFile)
	}
	b.do("allow it", chromedp.Click(chromedp.CSS("#asks button.allow")), chromedp.WaitVisible(chromedp.CSS("#asks .answered")))
	get(b, "wait for the turn's end", chromedp.Poll[bool](ended, chromedp.WithPollingTimeout(3*time.Minute)))
	if text := get(b, "read the turn's text", chromedp.Text(chromedp.CSS("#turn-text"))); !strings.Contains(text, afterTool) {
		t.Errorf("after the allowed tool the page shows %q, want %q", text, afterTool)
	}
	box, err := v.Connect(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"test", "-e", probeOut}})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("the allowed Bash call left no %s in the workspace (%v, exit %d)", probeFile, err, res.ExitCode)
	}
	toolResult := false
	for _, q := range stub.Requests() {
		toolResult = toolResult || q.ToolResult
	}
	if !toolResult {
		t.Error("the model endpoint got no tool result: the permission was not answered")
	}
	// The turn's end event is recorded as its stream ends: the poll reloads
	// the box's runs and events until both ends are shown.
	get(b, "wait for the lifecycle events", chromedp.Poll[bool](
		`(refresh("/api/boxes/" + encodeURIComponent(inspector.box)), [...document.querySelectorAll("#events td")].filter(td => td.textContent === "turn.ended").length >= 2)`,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(500*time.Millisecond)))
	b.do("show the bridge's log", chromedp.Click(chromedp.CSS("#load-logs")), chromedp.WaitVisible(chromedp.CSS("#log-stderr")))
	b.noErrors("permission")

	// Quality 100 makes a PNG.
	shot := get(b, "screenshot the box page", chromedp.FullScreenshot(100))
	path := filepath.Join(t.ArtifactDir(), "box-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the box page: %s (%d bytes)", path, len(shot))

	// The first run, replayed from the bridge's store.
	b.do("replay the first run", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#runs li[data-run=%q] button.replay`, run))))
	get(b, "wait for the replay's end", chromedp.Poll[bool](ended, chromedp.WithPollingTimeout(time.Minute)))
	if text := get(b, "read the replay", chromedp.Text(chromedp.CSS("#turn-text"))); text != replyText {
		t.Errorf("the replay of run %s shows %q, want %q", run, text, replyText)
	}
	b.noErrors("replay")

	// A turn that stalls, cancelled from the page.
	b.do("send a stalling turn", chromedp.SetValue(chromedp.CSS("#prompt"), stallPrompt), chromedp.Click(chromedp.CSS("#send")))
	get(b, "wait for the run", chromedp.Poll[bool](`!document.getElementById("cancel").disabled && window.inspector.firstEventAt > 0`,
		chromedp.WithPollingTimeout(2*time.Minute)))
	// A box running a turn is not suspended: the page shows the typed refusal.
	b.do("suspend the busy box", chromedp.Click(chromedp.CSS("#suspend")))
	get(b, "wait for the busy refusal", chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("errors").textContent.includes(%q)`,
		inspector.TypeBusy), chromedp.WithPollingTimeout(time.Minute)))
	b.do("clear the errors", chromedp.Evaluate[chromedp.Void](`clearErrors()`))
	get(b, "wait for the run again", chromedp.Poll[bool](`!document.getElementById("cancel").disabled && !document.getElementById("suspend").disabled`,
		chromedp.WithPollingTimeout(time.Minute)))
	b.do("cancel it", chromedp.Click(chromedp.CSS("#cancel")))
	get(b, "wait for the cancelled end", chromedp.Poll[bool](ended, chromedp.WithPollingTimeout(2*time.Minute)))
	if st := get(b, "read the status", chromedp.Text(chromedp.CSS("#turn-status"))); !strings.Contains(st, provider.StatusCancelled) {
		t.Errorf("the cancelled turn's status reads %q, want %s", st, provider.StatusCancelled)
	}
	b.noErrors("cancel")

	// Suspended from the page, resumed, and a turn still works.
	tag := `document.querySelector("#box-title .tag").textContent`
	start = time.Now()
	b.do("suspend the box", chromedp.Click(chromedp.CSS("#suspend")))
	get(b, "wait for the suspended state", chromedp.Poll[bool](tag+` === "suspended"`, chromedp.WithPollingTimeout(2*time.Minute)))
	suspendWall := time.Since(start)
	b.noErrors("suspend")
	if st, err := store.Load(); err != nil || st.Find(rec.ID) == nil || st.Find(rec.ID).Reference.Bearer != "" {
		t.Errorf("after the suspend the state's record is %+v (%v), want it without a bearer", st.Find(rec.ID), err)
	}
	start = time.Now()
	b.do("resume the box", chromedp.Click(chromedp.CSS("#resume")))
	get(b, "wait for the running state", chromedp.Poll[bool](tag+` === "running"`, chromedp.WithPollingTimeout(3*time.Minute)))
	t.Logf("suspend from the page: %v; resume: %v (wall, click to the state shown)", suspendWall.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	b.noErrors("resume")
	b.do("send a turn after the resume", chromedp.SetValue(chromedp.CSS("#prompt"), "Say hello again."), chromedp.Click(chromedp.CSS("#send")))
	get(b, "wait for the turn's end", chromedp.Poll[bool](ended, chromedp.WithPollingTimeout(3*time.Minute)))
	if text := get(b, "read the turn's text", chromedp.Text(chromedp.CSS("#turn-text"))); text != replyText {
		t.Errorf("after the resume the page streamed %q, want %q", text, replyText)
	}
	b.noErrors("turn after the resume")

	// Destroyed, and gone from the list.
	b.within(3*time.Minute).do("destroy the box", chromedp.Click(chromedp.CSS("#destroy")), chromedp.Click(chromedp.CSS("#destroy-confirm")),
		chromedp.WaitVisible(chromedp.CSS("#boxes, #no-boxes")))
	if get(b, "look for the box", chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q) !== null`, row))) {
		t.Error("the destroyed box is still listed")
	}
	if notice := get(b, "read the notice", chromedp.Evaluate[string](`document.getElementById("notice").textContent`)); !strings.Contains(notice, "destroyed box") {
		t.Errorf("the page says %q after the destroy, want it to say the box was destroyed", notice)
	}
	b.noErrors("destroy")
	if _, err := v.Connect(t.Context(), rec.ID); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect(destroyed box) = %v, want vendors.ErrNotFound", err)
	}
	st, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Find(rec.ID) != nil {
		t.Error("the state still names the destroyed box")
	}
}

// browser runs the test's steps in one tab, failing the test with the
// page's text when a step fails.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts the test bed's Chromium, headless, for the test.
func newBrowser(t *testing.T, env testbed.Env) browser {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(env.Chromium), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000))...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // starts the browser, for the life of bctx
		t.Fatalf("start %s: %v", env.Chromium, err)
	}
	// Each step has a bound of its own; the session as a whole has the
	// test's (a loaded machine takes long over many steps).
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(20 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(bctx, deadline.Add(-time.Minute))
	t.Cleanup(cancel)
	return browser{t: t, ctx: ctx}
}

func (b browser) fail(what string, err error) {
	b.t.Helper()
	page, _ := chromedp.Run(context.WithoutCancel(b.ctx), chromedp.Evaluate[string](`document.body.innerText`))
	b.t.Fatalf("%s: %v\npage:\n%s", what, err, page)
}

// within is b with its steps bounded by d (a context that has run once,
// as chromedp wants).
func (b browser) within(d time.Duration) browser {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	b.t.Cleanup(cancel)
	return browser{t: b.t, ctx: ctx}
}

func (b browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// noErrors fails the test if the page shows an error.
func (b browser) noErrors(what string) {
	b.t.Helper()
	if shown := get(b, what+": read the errors", chromedp.Evaluate[string](`document.getElementById("errors").textContent`)); strings.TrimSpace(shown) != "" {
		b.t.Errorf("%s: the page shows errors: %s", what, shown)
	}
}

func get[T any](b browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

// TestInspector_ErrorsInBrowser checks that the page shows what fails: a
// vendor that cannot be opened in the list, a box gone from its vendor on
// the box page, and a refused turn; and the pool page lists a pool.
func TestInspector_ErrorsInBrowser(t *testing.T) {
	env := testbed.RequireChromium(t)
	store, err := boxstate.Open(boxstate.Options{Path: filepath.Join(t.TempDir(), "boxes.json")})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ref := func(id, target string) *sandbox.Reference {
		return &sandbox.Reference{Vendor: target, BoxID: id, Bearer: "b-" + id, Harness: "claude-code", EnvironmentKey: "k-" + id}
	}
	if err := store.Update(t.Context(), func(st *boxstate.State) error {
		st.Boxes = append(st.Boxes,
			boxstate.Record{ID: "box-here-0001", Target: docker.Name, Image: "img", RunTag: "run-a", Created: now, Deadline: now.Add(time.Hour), Reference: ref("box-here-0001", docker.Name)},
			boxstate.Record{ID: "box-e2b-0002", Target: "e2b", Image: "img", RunTag: "run-b", Created: now, Deadline: now.Add(time.Hour), Reference: ref("box-e2b-0002", "e2b")})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v := inspector.ListVendor([]vendors.Info{{ID: "box-here-0001", Vendor: docker.Name, State: vendors.StateRunning, Created: now,
		Deadline: now.Add(time.Hour), Labels: map[string]string{boxmeta.LabelRunTag: "run-a", boxmeta.LabelOwner: store.Owner()}}})
	pools := t.TempDir()
	if err := os.WriteFile(filepath.Join(pools, "docker-claude-code-0a1b2c3d.json"), []byte(`{"version":1,"boxes":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := inspector.New(inspector.Options{Store: store, PoolDir: pools, Vendor: func(target string) (vendors.Vendor, error) {
		if target == "e2b" {
			return nil, errors.New("--target e2b needs E2B_API_KEY")
		}
		return v, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	link := serve(t, srv)

	b := newBrowser(t, env)
	row := `tr[data-box="box-here-0001"]`
	b.do("open the inspector", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(row)))
	if shown := get(b, "read the errors", chromedp.Text(chromedp.CSS("#errors"))); !strings.Contains(shown, "E2B_API_KEY") {
		t.Errorf("the list's errors read %q, want the e2b vendor's", shown)
	}
	b.do("open the box page", chromedp.Click(chromedp.CSS(row+" a.box-link")), chromedp.WaitVisible(chromedp.CSS("#prompt")))
	b.do("show the log", chromedp.Click(chromedp.CSS("#load-logs")),
		chromedp.WaitVisible(chromedp.CSS("#errors .error")))
	if shown := get(b, "read the errors", chromedp.Text(chromedp.CSS("#errors"))); !strings.Contains(shown, inspector.TypeBoxGone) {
		t.Errorf("the box page's errors read %q, want %s", shown, inspector.TypeBoxGone)
	}
	b.do("send an empty turn", chromedp.Click(chromedp.CSS("#send")))
	get(b, "wait for the refusal", chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("errors").textContent.includes(%q)`,
		inspector.TypeInvalidRequest), chromedp.WithPollingTimeout(30*time.Second)))

	// The pool page: the pool's file, and what its figures come from.
	b.do("open the pool page", chromedp.Click(chromedp.CSS("#pools-link")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-pool="docker-claude-code-0a1b2c3d"]`)))
	if ready := get(b, "read the pool's ready boxes", chromedp.Text(chromedp.CSS(`tr[data-pool="docker-claude-code-0a1b2c3d"] td.ready`))); ready != "0" {
		t.Errorf("the pool page shows %q ready, want 0", ready)
	}
	if shown := get(b, "read what is shown", chromedp.Text(chromedp.CSS("#pools-shown"))); shown != inspector.PoolsShown {
		t.Errorf("the pool page says %q, want inspector.PoolsShown", shown)
	}
	b.noErrors("pools")
}

// traceTo exports this process's spans to the test bed's OTLP receiver
// for the test, in batches of 100 ms.
func traceTo(t *testing.T, endpoint string) {
	t.Helper()
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "inspector-test"))))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
}

// serve runs srv on a loopback port until the test ends and returns the
// URL to open (with its token).
func serve(t *testing.T, srv *inspector.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	link := srv.URL(l.Addr())
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return link
}
