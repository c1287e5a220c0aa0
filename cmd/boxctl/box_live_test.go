package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
	"github.com/tangle-network/boxctl/cmd/boxctl/internal/turntext"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// transcript collects what commands print, to check that no secret is in
// any of it.
type transcript struct {
	mu  sync.Mutex
	all bytes.Buffer
}

func (tr *transcript) add(s ...string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, x := range s {
		tr.all.WriteString(x)
	}
}

// noSecrets fails t if any secret is in the transcript.
func (tr *transcript) noSecrets(t *testing.T, secrets map[string]string) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.all.Len() == 0 {
		t.Fatal("the transcript is empty")
	}
	for name, s := range secrets {
		if len(s) < 16 {
			t.Fatalf("secret %s %q is too short to search for", name, s)
		}
		if bytes.Contains(tr.all.Bytes(), []byte(s)) {
			t.Errorf("the %s appears in the output of boxctl at --log-level debug", name)
		}
	}
}

type cmdResult struct {
	stdout, stderr string
	code           int
	err            error
}

// boxctl runs boxctl args in this process at --log-level debug, with
// ctx as the command's context, adding its output to tr.
func boxctl(t *testing.T, ctx context.Context, tr *transcript, args ...string) cmdResult {
	t.Helper()
	var out, errOut lockedBuffer
	return boxctlTo(t, ctx, tr, &out, &errOut, args...)
}

// output is a writer whose text can be read back.
type output interface {
	io.Writer
	String() string
}

func boxctlTo(t *testing.T, ctx context.Context, tr *transcript, out, errOut output, args ...string) cmdResult {
	t.Helper()
	cmd := newRootCmd(newApp(out, errOut))
	cmd.SetArgs(append(args, "--log-level", "debug"))
	err := cmd.ExecuteContext(ctx)
	r := cmdResult{stdout: out.String(), stderr: errOut.String(), code: exitCode(err), err: err}
	if tr != nil {
		tr.add(r.stdout, r.stderr)
	}
	t.Logf("boxctl %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, tail(r.stdout, 1500), tail(r.stderr, 3000))
	return r
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// cleanupState destroys every box the test's state names and stops its
// local model endpoint, whatever the test left.
func cleanupState(t *testing.T, v vendors.Vendor) {
	t.Cleanup(func() {
		_, st, err := newApp(nil, nil).readState()
		if err != nil {
			return
		}
		for _, r := range st.Boxes {
			if r.ID != "" {
				_ = boxstate.Destroy(context.Background(), v, r.ID)
			}
			if r.Router != nil {
				_ = r.Router.Stop()
			}
		}
	})
}

func liveVendor(t *testing.T) *docker.Vendor {
	t.Helper()
	env := testbed.Require(t)
	t.Setenv("DOCKER_HOST", env.DockerHost)
	v, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func mustState(t *testing.T) *boxstate.State {
	t.Helper()
	_, st, err := newApp(nil, nil).readState()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func boxGone(t *testing.T, v vendors.Vendor, id string) bool {
	_, err := v.Connect(t.Context(), id)
	return errors.Is(err, vendors.ErrNotFound)
}

// boxProcesses returns the command lines of the processes in a box.
func boxProcesses(t *testing.T, tr *transcript) string {
	t.Helper()
	r := boxctl(t, t.Context(), tr, "exec", "last", "--", "sh", "-c",
		`for p in /proc/[0-9]*; do printf '%s ' "${p#/proc/}"; tr '\0' ' ' <"$p/cmdline" 2>/dev/null; echo; done`)
	if r.code != 0 {
		t.Fatalf("listing the box's processes: exit %d: %v", r.code, r.err)
	}
	return r.stdout
}

// harnessPIDs are the pids of the box's Claude Code processes: a turn's,
// and those the bridge started ahead of the next turns (spares).
func harnessPIDs(t *testing.T) map[string]bool {
	t.Helper()
	pids := map[string]bool{}
	for line := range strings.Lines(boxProcesses(t, nil)) {
		pid, cmd, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.Contains(cmd, "claude") && !strings.Contains(cmd, "/proc/") {
			pids[pid] = true
		}
	}
	return pids
}

// serveRouterStub serves stub where the boxes of v reach it (its host
// address) until the test ends, and returns its URL.
func serveRouterStub(t *testing.T, v localrouter.HostAddresser, stub *routerstub.Server) string {
	t.Helper()
	host, err := v.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stopStub := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- stub.Serve(ctx, l) }()
	t.Cleanup(func() { stopStub(); <-served })
	return "http://" + l.Addr().String()
}

// TestBoxVerbs_LocalRouter drives a real box end to end: up with the
// local model endpoint, turns (text, JSON, timeout), exec, logs,
// ls and rm, all at --log-level debug, and checks that neither the bearer
// nor the router key is ever printed.
func TestBoxVerbs_LocalRouter(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	statePath := useState(t)
	cleanupState(t, v)
	tr := &transcript{}

	r := boxctl(t, t.Context(), tr, "up", "--router", "local", "--image", img, "--lifetime", "10m", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatalf("up -o json printed %q: %v", r.stdout, err)
	}
	if up.ID == "" || !strings.HasPrefix(up.Endpoint, "http://127.0.0.1:") || up.Harness != "claude-code" || up.Bearer != "" {
		t.Errorf("up printed %+v: want an id, a loopback endpoint, the harness and no bearer", up)
	}
	if left := time.Until(up.Deadline); left < 9*time.Minute || left > 11*time.Minute {
		t.Errorf("up deadline %v is %v away, want the 10m lifetime", up.Deadline, left)
	}
	st := mustState(t)
	rec := st.Find(up.ID)
	if rec == nil || rec.Reference == nil || rec.Reference.Bearer == "" || rec.Router == nil {
		t.Fatalf("state after up = %+v: want the box with its reference and local router", st)
	}
	if !rec.Router.Running() || rec.Router.URL != up.Router {
		t.Errorf("local router %+v: want it running at %s", rec.Router, up.Router)
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(rec.Router.PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	routerKey := ""
	for _, kv := range strings.Split(string(environ), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == routerKeyEnv {
			routerKey = v
		}
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(rec.Router.PID) + "/cmdline")
	if routerKey == "" || strings.Contains(string(cmdline), routerKey) {
		t.Errorf("the local router's key %q must come through its environment, not its command line %q", routerKey, cmdline)
	}
	stateBytes, _ := os.ReadFile(statePath)
	if fi, err := os.Stat(statePath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	if strings.Contains(string(stateBytes), routerKey) {
		t.Errorf("the state file holds the router key")
	}

	t.Run("turn", func(t *testing.T) {
		r := boxctl(t, t.Context(), tr, "turn", "last", "Say hello")
		if r.code != 0 {
			t.Fatalf("turn: exit %d: %v", r.code, r.err)
		}
		if !strings.Contains(r.stdout, localReply) {
			t.Errorf("turn stdout = %q, want the local model's reply", r.stdout)
		}
		if !strings.Contains(r.stderr, "── completed · served by ") || !strings.Contains(r.stderr, "output tokens") {
			t.Errorf("turn stderr lacks the closing line with served model and usage:\n%s", r.stderr)
		}
	})
	t.Run("turn json", func(t *testing.T) {
		r := boxctl(t, t.Context(), tr, "turn", up.ID[:6], "Say hello again", "-o", "json")
		if r.code != 0 {
			t.Fatalf("turn -o json: exit %d: %v", r.code, r.err)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		var last turntext.Event
		for _, l := range lines {
			if err := json.Unmarshal([]byte(l), &last); err != nil {
				t.Fatalf("turn -o json line %q: %v", l, err)
			}
		}
		if last.Type != "result" || !strings.Contains(last.FinalText, localReply) {
			t.Errorf("last event = %+v, want the result with the reply", last)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		r := boxctl(t, t.Context(), tr, "turn", "last", "Take your time", "--timeout", "300ms")
		if r.code != 1 || !strings.Contains(r.err.Error(), "turn timeout after 300ms") {
			t.Errorf("turn --timeout 300ms: exit %d, %v; want 1 naming the timeout", r.code, r.err)
		}
	})
	t.Run("exec", func(t *testing.T) {
		r := boxctl(t, t.Context(), tr, "exec", "last", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if r.code != 3 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
			t.Errorf("exec: exit %d, stdout %q, stderr %q; want 3, out, err", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stderr, "exit status 3") {
			t.Errorf("exec printed its status as an error: %q", r.stderr)
		}
	})
	t.Run("logs", func(t *testing.T) {
		r := boxctl(t, t.Context(), tr, "logs", "last")
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "msg=listening") {
			t.Errorf("logs: exit %d (%v), output %q; want the bridge's output", r.code, r.err, tail(r.stdout+r.stderr, 500))
		}
	})
	t.Run("ls", func(t *testing.T) {
		r := boxctl(t, t.Context(), tr, "ls", "-o", "json")
		var rows []boxstate.Row
		if err := json.Unmarshal([]byte(r.stdout), &rows); r.code != 0 || err != nil {
			t.Fatalf("ls -o json: exit %d, %v: %q", r.code, err, r.stdout)
		}
		found := false
		for _, b := range rows {
			if b.ID == up.ID {
				found = b.InState && b.Harness == "claude-code" && b.State == "running" && b.Owner == testOwner(t) && b.RunTag == up.RunTag
			}
		}
		if !found {
			t.Errorf("ls -o json = %+v, want box %s running, in state, with its harness, owner and run tag", rows, up.ID)
		}
	})
	t.Run("rm", func(t *testing.T) {
		r := boxctl(t, t.Context(), tr, "rm", "last")
		if r.code != 0 || !strings.Contains(r.stdout, "removed "+shortID(up.ID)) {
			t.Fatalf("rm last: exit %d, %v, %q", r.code, r.err, r.stdout)
		}
		polltest.Until(t, 30*time.Second, "the box to be gone", func() bool { return boxGone(t, v, up.ID) })
		polltest.Until(t, 10*time.Second, "the local router to stop", func() bool { return !rec.Router.Running() })
		if _, err := os.Stat(rec.Router.Log); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the local router's log %s is left after rm (%v)", rec.Router.Log, err)
		}
		if st := mustState(t); len(st.Boxes) != 0 {
			t.Errorf("state after rm = %+v, want no boxes", st.Boxes)
		}
		if r := boxctl(t, t.Context(), tr, "turn", "last", "x"); r.code != 2 {
			t.Errorf("turn last after rm: exit %d, want 2 (no box)", r.code)
		}
	})
	tr.noSecrets(t, map[string]string{"bearer": rec.Reference.Bearer, "router key": routerKey})
}

// TestBoxVerbs_RouterAndGC runs a box against a Router given as --router
// URL with its key in TANGLE_API_KEY, prints the bearer only when asked,
// cancels a turn whose model call hangs (Ctrl-C), and collects garbage: a
// box the state forgot, and a record whose box is gone.
func TestBoxVerbs_RouterAndGC(t *testing.T) {
	v := liveVendor(t)
	img := boxtest.Image(t, boxtest.Options{})
	statePath := useState(t)
	cleanupState(t, v)
	tr := &transcript{}

	key := localrouter.NewKey()
	const reply = "The Router itself answered."
	script := routerstub.NewQueue(routerstub.Text(reply)).Side(routerstub.Text(reply))
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	routerURL := serveRouterStub(t, v, stub)
	t.Setenv(routerKeyVar, key)
	t.Setenv(routerURLEnv, "")

	r := boxctl(t, t.Context(), nil, "up", "--router", routerURL, "--image", img, "--show-bearer", "-o", "json")
	if r.code != 0 {
		t.Fatalf("up: exit %d: %v", r.code, r.err)
	}
	var up upResult
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatal(err)
	}
	rec := mustState(t).Find(up.ID)
	if rec == nil || up.Bearer == "" || up.Bearer != rec.Reference.Bearer || rec.Router != nil {
		t.Fatalf("up --show-bearer printed bearer %q; state %+v: want the state's bearer and no local router", up.Bearer, rec)
	}
	if strings.Contains(r.stderr, key) {
		t.Errorf("up --show-bearer logged the router key")
	}
	if r := boxctl(t, t.Context(), tr, "turn", "last", "Hello Router"); r.code != 0 || !strings.Contains(r.stdout, reply) {
		t.Fatalf("turn: exit %d (%v), stdout %q; want the Router's reply", r.code, r.err, r.stdout)
	}
	turnCalls := func() int {
		n := 0
		for _, r := range stub.Requests() {
			if !r.Side {
				n++
			}
		}
		return n
	}
	if turnCalls() == 0 {
		t.Errorf("the Router saw no request")
	}

	t.Run("cancel", func(t *testing.T) {
		script.Push(routerstub.Stall(3 * time.Minute))
		before := turnCalls()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan cmdResult, 1)
		go func() { done <- boxctl(t, ctx, tr, "turn", "last", "Wait for the model") }()
		polltest.Until(t, time.Minute, "the turn's model call to reach the Router", func() bool { return turnCalls() > before })
		// The turn's harness is among these; the others are spares,
		// which a cancel leaves alone.
		hanging := harnessPIDs(t)
		if len(hanging) == 0 {
			t.Fatal("no harness process in the box while its model call hangs")
		}
		cancel() // what Ctrl-C does through signal.NotifyContext in main
		var r cmdResult
		select {
		case r = <-done:
		case <-time.After(time.Minute):
			t.Fatal("turn still running a minute after its context was cancelled")
		}
		if r.code != 130 || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled turn: exit %d, %v; want 130 and context.Canceled", r.code, r.err)
		}
		polltest.Until(t, 30*time.Second, "the cancelled turn's harness to end in the box", func() bool {
			now := harnessPIDs(t)
			for pid := range hanging {
				if !now[pid] {
					return true
				}
			}
			return false
		})
		if r := boxctl(t, t.Context(), tr, "turn", "last", "After the cancel"); r.code != 0 || !strings.Contains(r.stdout, reply) {
			t.Errorf("turn after a cancelled one: exit %d: %v", r.code, r.err)
		}
	})

	// Nothing boxctl wrote holds the key: the state file, the events
	// file, the broker's log.
	noKeyInFiles(t, filepath.Dir(statePath), key)

	// The state forgets the box (as if its record were lost) and names a
	// box that no longer exists.
	sf, _ := boxstate.Open(boxstate.Options{})
	err = sf.Update(t.Context(), func(st *boxstate.State) error {
		st.Remove(func(r *boxstate.Record) bool { return r.ID == up.ID })
		st.Boxes = append(st.Boxes, boxstate.Record{ID: "0123456789abcdef-gone", Target: "docker", RunTag: "run-gone-" + up.RunTag,
			Created: time.Now().Add(-time.Hour), Deadline: time.Now().Add(-time.Minute)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = boxstate.Destroy(context.Background(), v, up.ID) })

	r = boxctl(t, t.Context(), tr, "gc", "--dry-run", "-o", "json")
	var res boxstate.Collected
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil {
		t.Fatalf("gc --dry-run: exit %d, %v, %q", r.code, err, r.stdout)
	}
	if !hasEntry(res.Removed, up.ID, "no longer in its owner's state") || !hasEntry(res.Forgotten, "0123456789abcdef-gone", boxstate.ReasonBoxGone) || !res.DryRun {
		t.Errorf("gc --dry-run = %+v; want the forgotten box to remove and the gone record to forget", res)
	}
	if boxGone(t, v, up.ID) || len(mustState(t).Boxes) != 1 {
		t.Fatalf("gc --dry-run changed something")
	}
	r = boxctl(t, t.Context(), tr, "gc")
	if r.code != 0 || !strings.Contains(r.stdout, "removed "+shortID(up.ID)) || !strings.Contains(r.stdout, "forgot 0123456789ab") {
		t.Fatalf("gc: exit %d, %v, %q", r.code, r.err, r.stdout)
	}
	polltest.Until(t, 30*time.Second, "gc to remove the forgotten box", func() bool { return boxGone(t, v, up.ID) })
	if st := mustState(t); len(st.Boxes) != 0 {
		t.Errorf("state after gc = %+v, want none", st.Boxes)
	}
	// The event log saw the box made, ready, and removed by gc.
	r = boxctl(t, t.Context(), tr, "events")
	var seen []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev sandbox.Event
		if err := json.Unmarshal([]byte(line), &ev); err == nil && ev.BoxID == up.ID && !strings.HasPrefix(string(ev.Type), "turn.") {
			seen = append(seen, string(ev.Type)+":"+ev.Reason)
		}
	}
	if want := []string{"created:", "ready:", "destroyed:gc"}; r.code != 0 || !slices.Equal(seen, want) {
		t.Errorf("events of box %s = %v (exit %d), want %v", shortID(up.ID), seen, r.code, want)
	}
	tr.noSecrets(t, map[string]string{"bearer": up.Bearer, "router key": key})
}

func hasEntry(es []boxstate.Entry, id, reason string) bool {
	for _, e := range es {
		if e.ID == id && strings.Contains(e.Reason, reason) && e.Error == "" {
			return true
		}
	}
	return false
}

// noKeyInFiles fails t if a regular file under dir holds key; it names
// the files it read.
func noKeyInFiles(t *testing.T, dir, key string) {
	t.Helper()
	var read []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		read = append(read, rel)
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("%s holds the model key", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(read, "boxes.json") || !slices.Contains(read, "boxes.events.jsonl") {
		t.Errorf("read %v, want the state and events files among them", read)
	}
	t.Logf("no model key in %v", read)
}
