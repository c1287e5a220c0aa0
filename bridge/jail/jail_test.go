package jail_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/jail"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// probeVar makes the test binary a probe program: it runs one action
// inside a jail and prints what happened.
const probeVar = "JAIL_TEST_PROBE"

func TestMain(m *testing.M) {
	jail.ServeRelayIfAsked()
	if action := os.Getenv(probeVar); action != "" {
		os.Exit(probe(action, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// probe runs action (write, read, dial, get) on args[0] and prints "ok"
// or "fail: <error>".
func probe(action string, args []string) int {
	var err error
	switch action {
	case "write":
		err = os.WriteFile(args[0], []byte("x"), 0o600)
	case "read":
		_, err = os.ReadFile(args[0])
	case "list":
		_, err = os.ReadDir(args[0])
	case "dial":
		var c net.Conn
		if c, err = net.Dial("tcp", args[0]); err == nil {
			c.Close()
		}
	case "get":
		var resp *http.Response
		if resp, err = http.Get(args[0]); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			fmt.Printf("ok %d %s\n", resp.StatusCode, b)
			return 0
		}
	default:
		err = errors.New("unknown action " + action)
	}
	if err != nil {
		fmt.Printf("fail: %v\n", err)
		return 0
	}
	fmt.Println("ok")
	return 0
}

// fixture is a bridge-like layout: a data directory holding a store file
// and a session's state directory, a project directory, and a host
// directory outside both.
type fixture struct {
	data, state, project, outside string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	base := t.TempDir()
	f := fixture{data: filepath.Join(base, "data"), project: filepath.Join(base, "project"), outside: filepath.Join(base, "outside")}
	f.state = filepath.Join(f.data, "sessions", "claude-code", "s1")
	for _, d := range []string{f.state, f.project, f.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{filepath.Join(f.data, "bridge.db"), filepath.Join(f.outside, "secret"), filepath.Join(f.state, "kept")} {
		if err := os.WriteFile(file, []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func newJailer(t *testing.T, f fixture, routerURL string) *jail.Jailer {
	t.Helper()
	j := jail.New(jail.Options{DataDir: f.data, RouterURL: routerURL})
	if err := j.Probe(context.Background()); err != nil {
		t.Fatalf("Probe() = %v; these tests need a working bwrap (apt-get install bubblewrap)", err)
	}
	return j
}

// run runs the probe action inside the jail r prepared and returns its
// output.
func run(t *testing.T, j *jail.Jailer, f fixture, r jail.Request, action string, args ...string) string {
	t.Helper()
	p, err := j.Prepare(r, f.project, f.state)
	if err != nil {
		t.Fatalf("Prepare(%+v) = %v", r, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, cleanup, err := p.Wrap(harness.Command{Path: exe, Args: args, Dir: f.project,
		Env: append(os.Environ(), probeVar+"="+action)})
	if err != nil {
		t.Fatalf("Wrap() = %v", err)
	}
	defer cleanup()
	c := exec.Command(cmd.Path, cmd.Args...)
	c.Env, c.Dir = cmd.Env, cmd.Dir
	var out, stderr bytes.Buffer
	c.Stdout, c.Stderr = &out, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("jailed %s %q: %v; stderr: %s", action, args, err, stderr.String())
	}
	return strings.TrimSpace(out.String())
}

func TestJail_fileSystem(t *testing.T) {
	f := newFixture(t)
	j := newJailer(t, f, "")
	// The subtests run in parallel; the checks after them wait for them.
	t.Run("access", func(t *testing.T) { fileSystemCases(t, j, f) })
	// Nothing leaked out of the jail.
	for _, p := range []string{filepath.Join(f.outside, "new"), filepath.Join(f.data, "new")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the jailed write (err %v)", p, err)
		}
	}
}

func fileSystemCases(t *testing.T, j *jail.Jailer, f fixture) {
	write, fs := jail.Request{Mode: wire.JailWrite}, jail.Request{Mode: wire.JailFS}
	for _, tc := range []struct {
		name         string
		r            jail.Request
		action, path string
		ok           bool
	}{
		{"write-jail writes its project", write, "write", "project/new", true},
		{"write-jail writes its state", write, "write", "data/sessions/claude-code/s1/state", true},
		{"write-jail writes its home", write, "write", "project/.agent-home/.config/x", true},
		{"write-jail cannot write outside", write, "write", "outside/new", false},
		{"write-jail cannot write the data dir", write, "write", "data/new", false},
		{"write-jail cannot write /etc", write, "write", "/etc/jail-test", false},
		{"write-jail reads the host", write, "read", "outside/secret", true},
		{"write-jail cannot read the store", write, "read", "data/bridge.db", false},
		{"fs-jail writes its project", fs, "write", "project/new2", true},
		{"fs-jail lists its state", fs, "list", "data/sessions/claude-code/s1", true},
		{"fs-jail reads its state", fs, "read", "data/sessions/claude-code/s1/kept", true},
		{"fs-jail cannot read the store", fs, "read", "data/bridge.db", false},
		{"fs-jail sees the session dirs' path", fs, "list", "data/sessions/claude-code", true},
		{"fs-jail cannot read outside", fs, "read", "outside/secret", false},
		{"fs-jail cannot write outside", fs, "write", "outside/new", false},
		{"fs-jail reads system files", fs, "read", "/etc/passwd", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.path
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(f.data), path)
			}
			got := run(t, j, f, tc.r, tc.action, path)
			if (got == "ok") != tc.ok {
				t.Errorf("jailed %s %s = %q, want ok %t", tc.action, path, got, tc.ok)
			}
		})
	}
}

func TestJail_network(t *testing.T) {
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "model says hi")
	}))
	t.Cleanup(router.Close)
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	f := newFixture(t)
	j := newJailer(t, f, router.URL)
	for _, mode := range []string{wire.JailOff, wire.JailWrite, wire.JailFS} {
		r := jail.Request{Mode: mode, Net: true}
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			if got := run(t, j, f, r, "get", router.URL+"/v1/messages"); got != "ok 200 model says hi" {
				t.Errorf("jailed GET of the model endpoint = %q, want ok 200 model says hi", got)
			}
			if got := run(t, j, f, r, "dial", other.Addr().String()); !strings.HasPrefix(got, "fail:") {
				t.Errorf("jailed dial of another local listener = %q, want a failure", got)
			}
			if got := run(t, j, f, r, "dial", "1.1.1.1:443"); !strings.HasPrefix(got, "fail:") {
				t.Errorf("jailed dial of a remote address = %q, want a failure", got)
			}
			if got := run(t, j, f, r, "write", filepath.Join(f.project, "net-"+mode)); got != "ok" {
				t.Errorf("net-jailed write of the project = %q", got)
			}
		})
	}
	// A DNS-named endpoint resolves to the relay through the jail's hosts.
	named := strings.Replace(router.URL, "127.0.0.1", "localhost", 1)
	if got := run(t, newJailer(t, f, named), f, jail.Request{Mode: wire.JailFS, Net: true}, "get", named+"/v1/messages"); got != "ok 200 model says hi" {
		t.Errorf("jailed GET of %s = %q, want ok 200 model says hi", named, got)
	}
	// Without net-jail the other listener is reachable: the test can tell.
	if got := run(t, j, f, jail.Request{Mode: wire.JailWrite}, "dial", other.Addr().String()); got != "ok" {
		t.Errorf("write-jailed dial without net-jail = %q, want ok", got)
	}
}

func TestJailer_Check(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j := newJailer(t, f, "https://router.example.com/v1")
	for _, tc := range []struct {
		name string
		j    *jail.Jailer
		r    jail.Request
		cwd  string
		want any // nil or a pointer to the error type
	}{
		{"no confinement", j, jail.Request{}, "", nil},
		{"fs-jail", j, jail.Request{Mode: wire.JailFS}, f.project, nil},
		{"net-jail with the enforced allow list", j, jail.Request{Net: true, Allow: []string{"ROUTER.example.com"}}, f.project, nil},
		{"net-jail with another allow list", j, jail.Request{Net: true, Allow: []string{"evil.example.com:443"}}, f.project, new(*jail.NetError)},
		{"net-jail without a model endpoint", jail.New(jail.Options{DataDir: f.data}), jail.Request{Net: true}, f.project, new(*jail.NetError)},
		{"root outside the project", j, jail.Request{Mode: wire.JailWrite, Root: f.outside}, f.project, new(*jail.RequestError)},
		{"root escaping the project", j, jail.Request{Mode: wire.JailWrite, Root: "../outside"}, f.project, new(*jail.RequestError)},
		{"root is the project", j, jail.Request{Mode: wire.JailWrite, Root: "."}, f.project, new(*jail.RequestError)},
		{"project is /", j, jail.Request{Mode: wire.JailFS}, "/", new(*jail.RequestError)},
		{"project in the data dir", j, jail.Request{Mode: wire.JailFS}, f.state, new(*jail.RequestError)},
		{"no bwrap", jail.New(jail.Options{Bwrap: "/nonexistent/bwrap", DataDir: f.data}), jail.Request{Mode: wire.JailFS}, f.project, new(*jail.UnavailableError)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.j.Check(ctx, tc.r, tc.cwd)
			switch want := tc.want.(type) {
			case nil:
				if err != nil {
					t.Errorf("Check() = %v, want nil", err)
				}
			case **jail.NetError:
				if !errors.As(err, want) {
					t.Errorf("Check() = %v, want a *NetError", err)
				}
			case **jail.RequestError:
				if !errors.As(err, want) {
					t.Errorf("Check() = %v, want a *RequestError", err)
				}
			case **jail.UnavailableError:
				if !errors.As(err, want) || (*want).Reason != jail.ReasonBwrapMissing {
					t.Errorf("Check() = %v, want an *UnavailableError %s", err, jail.ReasonBwrapMissing)
				}
			}
		})
	}
}

func TestJailer_Caps(t *testing.T) {
	f := newFixture(t)
	j := newJailer(t, f, "https://router.example.com/v1")
	got := j.Caps()
	want := wire.ExecutionCaps{Kinds: []string{"host"}, TimeoutMS: true,
		Jail:    wire.JailCaps{Modes: []string{"off", "write-jail", "fs-jail"}, Enforcer: "bwrap", Floor: "off"},
		NetJail: wire.NetJailCaps{Modes: []string{"off", "net-jail"}, Allow: []string{"router.example.com:443"}, Floor: "off"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Caps() = %+v, want %+v", got, want)
	}
	missing := jail.New(jail.Options{Bwrap: "/nonexistent/bwrap", RouterURL: "https://router.example.com"})
	if err := missing.Probe(context.Background()); err == nil {
		t.Fatal("Probe() without bwrap = nil")
	}
	c := missing.Caps()
	if fmt.Sprint(c.Jail.Modes) != "[off]" || fmt.Sprint(c.NetJail.Modes) != "[off]" || c.Jail.Unavailable == "" {
		t.Errorf("Caps() without bwrap = %+v, want only off, with a reason", c)
	}
}

// TestPrepared_runs shows a command's other executables (Runs) in a
// file-system jail, as its own: their directories are bound read-only.
func TestPrepared_runs(t *testing.T) {
	f := newFixture(t)
	j := newJailer(t, f, "")
	tool := filepath.Join(f.outside, "tools", "harness")
	if err := os.MkdirAll(filepath.Dir(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := j.Prepare(jail.Request{Mode: wire.JailFS}, f.project, f.state)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bound := func(cmd harness.Command) bool {
		dir := filepath.Dir(tool)
		for i := 0; i+2 < len(cmd.Args); i++ {
			if cmd.Args[i] == "--ro-bind" && cmd.Args[i+1] == dir && cmd.Args[i+2] == dir {
				return true
			}
		}
		return false
	}
	for _, runs := range [][]string{nil, {tool}} {
		cmd, cleanup, err := p.Wrap(harness.Command{Path: exe, Runs: runs, Dir: f.project})
		if err != nil {
			t.Fatalf("Wrap(runs %q) = %v", runs, err)
		}
		cleanup()
		if got := bound(cmd); got != (runs != nil) {
			t.Errorf("Wrap(runs %q): %s bound = %v", runs, filepath.Dir(tool), got)
		}
	}
	if _, _, err := p.Wrap(harness.Command{Path: exe, Runs: []string{filepath.Join(f.outside, "missing")}}); err == nil {
		t.Error("Wrap with a missing run = nil error")
	}
}

// TestJailer_Adopt takes the verdict of another jailer's probe of the
// same binary, and only of one that probed.
func TestJailer_Adopt(t *testing.T) {
	f := newFixture(t)
	probed := newJailer(t, f, "https://router.example.com/v1") // probed: available
	missing := jail.New(jail.Options{Bwrap: "/nonexistent/bwrap"})
	if err := missing.Probe(context.Background()); err == nil {
		t.Fatal("Probe() without bwrap = nil")
	}
	cases := []struct {
		name        string
		j, from     *jail.Jailer
		adopted     bool
		unavailable bool // the adopter's Caps say the jail is unavailable
	}{
		{"available", jail.New(jail.Options{RouterURL: "https://router.example.com/v1"}), probed, true, false},
		{"unavailable", jail.New(jail.Options{Bwrap: "/nonexistent/bwrap"}), missing, true, true},
		{"none", jail.New(jail.Options{}), nil, false, true},
		{"not probed", jail.New(jail.Options{}), jail.New(jail.Options{}), false, true},
		{"another binary", jail.New(jail.Options{}), missing, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.j.Adopt(c.from); got != c.adopted {
				t.Fatalf("Adopt() = %v, want %v", got, c.adopted)
			}
			caps := c.j.Caps()
			if got := caps.Jail.Unavailable != ""; got != c.unavailable {
				t.Errorf("Caps().Jail = %+v, want unavailable %v", caps.Jail, c.unavailable)
			}
			if c.adopted && c.unavailable && caps.Jail.Unavailable == "not probed yet" {
				t.Errorf("Caps().Jail.Unavailable = %q, want the adopted verdict", caps.Jail.Unavailable)
			}
		})
	}
}
