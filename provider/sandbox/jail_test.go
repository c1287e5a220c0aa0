package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
	"github.com/tangle-network/boxctl/internal/routerstub"
	"github.com/tangle-network/boxctl/internal/sandboxtest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/docker"
)

// jailScript answers a turn whose prompt ends with a key of commands (the
// harness puts its reminders before the user's text) with a call of
// Claude Code's Bash tool running that command, the call's result with
// "done", and side calls with "side".
type jailScript struct {
	mu       sync.Mutex
	commands map[string]string
}

func (s *jailScript) set(prompt, command string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands[prompt] = command
}

func (s *jailScript) Pick(r routerstub.Request) routerstub.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Side:
		return routerstub.Text("side")
	case r.ToolResult:
		return routerstub.Text("done")
	}
	for prompt, cmd := range s.commands {
		if strings.HasSuffix(r.Prompt, prompt) {
			return routerstub.ToolCall("Bash", fmt.Sprintf(`{"command":%q,"description":"jail probe"}`, cmd))
		}
	}
	return routerstub.Text("done")
}

// outcomeRe finds a probe's printed outcome in a request body (the
// command itself names no outcome).
var outcomeRe = regexp.MustCompile(`id=(\w+) outcome=(\w+)`)

// jailRouter is a model endpoint on the boxes' network that scripts the
// probes, and a second listener beside it that a net jail must not reach.
type jailRouter struct {
	script *jailScript
	stub   *routerstub.Server
	router sandbox.Router
	other  string // host:port of the other listener
}

func newJailRouter(t *testing.T, v *docker.Vendor) *jailRouter {
	t.Helper()
	host, err := v.HostAddress(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	key := "router-key-" + randText()
	s := &jailScript{commands: map[string]string{}}
	stub, err := routerstub.New(routerstub.Options{Keys: []string{key}, Script: s})
	if err != nil {
		t.Fatal(err)
	}
	listen := func(h http.Handler) string {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatalf("listen on the boxes' network: %v", err)
		}
		srv := &http.Server{Handler: h}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
		return l.Addr().String()
	}
	ep := listen(stub)
	other := listen(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "other") }))
	return &jailRouter{script: s, stub: stub, router: sandbox.Router{URL: "http://" + ep, Key: key}, other: other}
}

// outcome returns what the probe id printed, as the harness's tool result
// carried it back to the model endpoint.
func (r *jailRouter) outcome(id string) string {
	for _, q := range r.stub.Requests() {
		if !q.ToolResult {
			continue
		}
		for _, m := range outcomeRe.FindAllStringSubmatch(string(q.Body), -1) {
			if m[1] == id {
				return m[2]
			}
		}
	}
	return ""
}

// probeScript is the program a jailed turn runs through Claude Code's
// Bash tool (its arguments are plain words: the harness refuses commands
// whose variables it cannot check). It prints "id=ID outcome=X":
// written/refused for a write, read/hidden for a read, the HTTP status of
// a GET, connected or the error code of a TCP connection.
const probeScript = `const [op, id, arg] = process.argv.slice(2);
const fs = require("fs");
const done = (o) => { console.log("id=" + id + " outcome=" + o); process.exit(0); };
setTimeout(() => done("timeout"), 5000);
switch (op) {
case "write": try { fs.writeFileSync(arg, "x"); done("written"); } catch { done("refused"); } break;
case "read": try { fs.readFileSync(arg); done("read"); } catch { done("hidden"); } break;
case "get": fetch(arg).then((r) => done("http" + r.status), (e) => done("failed")); break;
case "dial": {
  const i = arg.lastIndexOf(":");
  require("net").connect(Number(arg.slice(i + 1)), arg.slice(0, i)).on("connect", () => done("connected")).on("error", (e) => done(e.code));
  break;
}
}
`

// probePath is where probeScript lives in the box: in the project
// directory, which every jail shows.
var probePath = path.Join(sandbox.Workspace, ".jail-probe.js")

// modelProbePath is the path the net-jailed probe asks the model
// endpoint for.
const modelProbePath = "/jail-probe/netmodel"

func probe(op, id, arg string) string {
	return strings.Join([]string{"node", probePath, op, id, arg}, " ")
}

// jailTurn runs one turn of a retained Claude Code session in the box
// under execution ex, through the provider client against the box's
// bridge, with the Bash command cmd scripted as the model's answer and
// its permission question answered "allow once".
func jailTurn(t *testing.T, jr *jailRouter, env *sandbox.Environment, ex provider.Execution, id, cmd string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ep, err := env.Box().Endpoint(ctx, sandbox.BridgePort)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := provider.New(provider.Options{BaseURL: ep.URL, BearerToken: env.Reference().Bearer, HTTPClient: ep.Client(),
		DefaultModel: "claude-code/" + claude.Model.Default, DefaultExecution: &ex})
	if err != nil {
		t.Fatal(err)
	}
	defer pv.Close(context.WithoutCancel(ctx))
	if _, err := pv.Capabilities(ctx); err != nil {
		t.Fatalf("capabilities: %v", err)
	}
	prof := claude
	prof.Name = claude.Harness
	penv, err := pv.Create(ctx, provider.CreateRequest{Profile: prof, Workspace: &provider.Workspace{Cwd: sandbox.Workspace}})
	if err != nil {
		t.Fatalf("provider environment: %v", err)
	}
	prompt := "jail probe " + id
	jr.script.set(prompt, cmd)
	ref, err := penv.Dispatch(ctx, provider.Turn{Prompt: prompt, SessionID: "jail-" + id, TurnID: "turn-" + id, ExecutionID: "exec-" + id})
	if err != nil {
		return err
	}
	ts, err := penv.Session(ref.ID, provider.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for ev, err := range ts.Events(ctx, "0") {
		if err != nil {
			return err
		}
		if ev.Type != provider.EventInteraction || ev.Interaction == nil {
			continue
		}
		c, err := provider.NewInteractionCommand("allow-"+id, *ev.Interaction,
			wire.InteractionResponse{Outcome: wire.OutcomeAccepted, Data: provider.PermissionGrant(wire.GrantAllowOnce)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.RespondToInteraction(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func boxFile(t *testing.T, b vendors.Box, file string) bool {
	t.Helper()
	res, err := b.Exec(t.Context(), vendors.ExecSpec{Command: []string{"test", "-e", file}})
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode == 0
}

// TestJail_InDockerBox runs jailed turns of the real Claude Code in a
// Docker box, through the bridge's turn path: write-jail writes the
// project and nothing outside it, fs-jail hides the box's other paths,
// net-jail reaches the model endpoint and neither another listener on the
// boxes' network nor the box's own bridge. Each refusal has an unjailed
// twin that succeeds, so a refusal is the jail's doing. Under gVisor the
// filesystem jails hold alike, and the bridge refuses net-jail (bwrap
// cannot bring up a network namespace there) instead of running the turn
// unconfined.
func TestJail_InDockerBox(t *testing.T) {
	f := setup(t)
	gv := sandboxtest.GVisor(t)
	for _, rt := range []struct {
		name     string
		v        *docker.Vendor
		netJails bool
	}{{"runc", f.Vendor, true}, {"gvisor", gv, false}} {
		t.Run(rt.name, func(t *testing.T) {
			t.Parallel()
			jailsInBox(t, f, rt.v, rt.netJails)
		})
	}
}

func jailsInBox(t *testing.T, f *fixture, v *docker.Vendor, netJails bool) {
	jr := newJailRouter(t, v)
	p := f.On(t, target{Name: "docker", Vendor: v, Image: f.Image}, func(o *sandbox.Options) { o.Router = jr.router })
	env := create(t, p, sandbox.CreateRequest{Profile: claude})
	box := env.Box()

	home := "/home/box"
	secret := path.Join(home, "jail-secret")
	for file, data := range map[string]string{secret: "s", probePath: probeScript} {
		if err := box.Write(t.Context(), file, []byte(data), 0o644); err != nil {
			t.Fatalf("write %s in the box: %v", file, err)
		}
	}
	var (
		write  = provider.Execution{Kind: provider.ExecutionHost, Jail: &provider.Jail{Mode: "write-jail"}}
		fs     = provider.Execution{Kind: provider.ExecutionHost, Jail: &provider.Jail{Mode: "fs-jail"}}
		netj   = provider.Execution{Kind: provider.ExecutionHost, Jail: &provider.Jail{Mode: "fs-jail"}, NetJail: &provider.NetJail{Mode: "net-jail"}}
		noJail = provider.Execution{Kind: provider.ExecutionHost}
	)
	for _, tc := range []struct {
		id   string
		ex   provider.Execution
		cmd  string
		want string
		file string // a file the probe made or must not have made
	}{
		{"writeproject", write, probe("write", "writeproject", sandbox.Workspace+"/jail-made"), "written", sandbox.Workspace + "/jail-made"},
		{"writeoutside", write, probe("write", "writeoutside", home+"/jail-outside"), "refused", home + "/jail-outside"},
		{"writetmp", write, probe("write", "writetmp", "/tmp/jail-outside"), "refused", "/tmp/jail-outside"},
		{"unjailedwrite", noJail, probe("write", "unjailedwrite", home+"/jail-unjailed"), "written", home + "/jail-unjailed"},
		{"fsreadhome", fs, probe("read", "fsreadhome", secret), "hidden", ""},
		{"writereadhome", write, probe("read", "writereadhome", secret), "read", ""},
		{"fswriteproject", fs, probe("write", "fswriteproject", sandbox.Workspace+"/jail-made-fs"), "written", sandbox.Workspace + "/jail-made-fs"},
		// The harness's own model endpoint (the bridge's relay on the
		// box's loopback), as its tools see it.
		{"netmodel", netj, probe("get", "netmodel", "${ANTHROPIC_BASE_URL}"+modelProbePath), "http404", ""},
		{"netother", netj, probe("dial", "netother", jr.other), "ENETUNREACH", ""},
		{"netbridge", netj, probe("dial", "netbridge", "127.0.0.1:"+strconv.Itoa(sandbox.BridgePort)), "ECONNREFUSED", ""},
		{"unjailedother", noJail, probe("dial", "unjailedother", jr.other), "connected", ""},
		{"unjailedbridge", noJail, probe("dial", "unjailedbridge", "127.0.0.1:"+strconv.Itoa(sandbox.BridgePort)), "connected", ""},
	} {
		t.Run(tc.id, func(t *testing.T) {
			err := jailTurn(t, jr, env, tc.ex, tc.id, tc.cmd)
			if tc.ex.NetJail != nil && !netJails {
				var be *provider.BridgeError
				if !errors.As(err, &be) || be.Type != "not_configured" || !strings.Contains(be.Message, "network namespace") {
					t.Fatalf("net-jailed turn where bwrap has no network namespace = %v, want the bridge's not_configured refusal", err)
				}
				if got := jr.outcome(tc.id); got != "" {
					t.Errorf("the refused turn ran its probe anyway: %s", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("turn: %v", err)
			}
			if got := jr.outcome(tc.id); got != tc.want {
				t.Errorf("probe %s = %q, want %q (command %s)", tc.id, got, tc.want, tc.cmd)
			}
			if tc.file != "" {
				if made := boxFile(t, box, tc.file); made != (tc.want == "written") {
					t.Errorf("%s exists = %v after the probe, want %v", tc.file, made, tc.want == "written")
				}
			}
		})
	}
	if !netJails {
		return
	}
	// The net-jailed probe's GET reached the model endpoint itself (which
	// answers an unknown path 404), and the net-jailed turns got their model
	// answers through the relay: the endpoint saw their tool results.
	if !slices.ContainsFunc(jr.stub.Requests(), func(r routerstub.Request) bool { return r.Path == modelProbePath }) {
		t.Errorf("the model endpoint saw no GET %s from the net-jailed probe", modelProbePath)
	}
	for _, id := range []string{"netmodel", "netother", "netbridge"} {
		if jr.outcome(id) == "" {
			t.Errorf("the model endpoint saw no tool result of the net-jailed turn %s", id)
		}
	}
}

// TestJail_StockProfileRefusesJails checks the other side: a box under
// Docker's stock seccomp profile and /proc masks (WithoutJails) cannot
// run bubblewrap, and its bridge refuses a jailed turn instead of running
// it unconfined.
func TestJail_StockProfileRefusesJails(t *testing.T) {
	f := setup(t)
	env := testbed.Require(t)
	v, err := docker.New(docker.WithHost(env.DockerHost), docker.WithNetwork(testNetwork), docker.WithoutJails())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	jr := newJailRouter(t, v)
	p := f.On(t, target{Name: "docker", Vendor: v, Image: f.Image}, func(o *sandbox.Options) { o.Router = jr.router })
	senv := create(t, p, sandbox.CreateRequest{Profile: claude})
	err = jailTurn(t, jr, senv, provider.Execution{Kind: provider.ExecutionHost, Jail: &provider.Jail{Mode: "write-jail"}},
		"stockwrite", probe("write", "stockwrite", "/home/box/jail-stock"))
	var be *provider.BridgeError
	if !errors.As(err, &be) || be.Type != "not_configured" {
		t.Fatalf("jailed turn in a box under the stock profile = %v, want the bridge's not_configured refusal", err)
	}
	t.Logf("refused as expected: %v", err)
	if got := jr.outcome("stockwrite"); got != "" {
		t.Errorf("the refused turn ran its probe anyway: %s", got)
	}
}
