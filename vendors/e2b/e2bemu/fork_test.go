package e2bemu_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
)

// forkResult is SandboxForkResult as the tests read it.
type forkResult struct {
	Sandbox *struct {
		SandboxID, TemplateID, EnvdAccessToken string
	} `json:"sandbox"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type sandboxDetail struct {
	SandboxID, TemplateID, State string
	EndAt                        time.Time
	Metadata                     map[string]string
}

// TestServer_Fork forks a running sandbox into two with one call: the
// source runs on with its id and end, each fork is a sandbox of its own
// (id, envd token, the timeout asked) with the source's template,
// metadata and disk, and the image they run goes with the last of them.
func TestServer_Fork(t *testing.T) {
	env := start(t, nil)
	v := env.Client(t)
	src := create(t, v, vendors.CreateSpec{Labels: map[string]string{"suite": "fork"}})
	ctx := t.Context()
	if err := src.Write(ctx, "/tmp/fork/kept.txt", []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := rawClient(env)
	api := "http://api." + env.Server.Domain()
	key := map[string]string{"X-API-Key": e2btest.APIKey}
	get := func(id string) sandboxDetail {
		t.Helper()
		a := do(t, c, "GET", api+"/sandboxes/"+id, key, "")
		var d sandboxDetail
		if err := json.Unmarshal([]byte(a.body), &d); a.status != 200 || err != nil {
			t.Fatalf("GET /sandboxes/%s = %d %q", id, a.status, a.body)
		}
		return d
	}
	before := get(src.ID())

	a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/fork", key, `{"timeout":120,"count":2}`)
	var res []forkResult
	if err := json.Unmarshal([]byte(a.body), &res); a.status != 201 || err != nil || len(res) != 2 {
		t.Fatalf("fork = %d %q, want 201 with two results", a.status, a.body)
	}
	ids := map[string]bool{}
	for i, r := range res {
		if r.Sandbox == nil || r.Error != nil {
			t.Fatalf("fork %d = %+v, want a sandbox", i, r)
		}
		ids[r.Sandbox.SandboxID] = true
		t.Cleanup(func() { env.Server.Vanish(r.Sandbox.SandboxID) })
	}
	if len(ids) != 2 || ids[src.ID()] || res[0].Sandbox.EnvdAccessToken == "" || res[0].Sandbox.EnvdAccessToken == res[1].Sandbox.EnvdAccessToken {
		t.Errorf("forks %+v %+v: want two new ids, each with an envd token of its own", *res[0].Sandbox, *res[1].Sandbox)
	}
	after := get(src.ID())
	if after.State != "running" || !after.EndAt.Equal(before.EndAt) {
		t.Errorf("source after the fork = %s until %v, want running until %v as before", after.State, after.EndAt, before.EndAt)
	}
	for _, r := range res {
		d := get(r.Sandbox.SandboxID)
		if d.State != "running" || d.TemplateID != before.TemplateID || r.Sandbox.TemplateID != before.TemplateID ||
			!maps.Equal(d.Metadata, before.Metadata) {
			t.Errorf("fork %s = %+v, want running, of template %s, with the source's metadata %v", d.SandboxID, d, before.TemplateID, before.Metadata)
		}
		if left := time.Until(d.EndAt); left > 120*time.Second || left < 60*time.Second {
			t.Errorf("fork %s ends in %v, want about the 120 s asked", d.SandboxID, left)
		}
		fork, err := v.Connect(ctx, r.Sandbox.SandboxID)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := fork.Read(ctx, "/tmp/fork/kept.txt"); err != nil || string(got) != "kept\n" {
			t.Errorf("fork %s reads %q, %v; want the source's file", d.SandboxID, got, err)
		}
	}
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if imgs := snapshotImages(t, cli, "fork-"+src.ID()); len(imgs) != 1 {
		t.Errorf("images of the fork = %v, want one", imgs)
	}
	if a := do(t, c, "GET", api+"/snapshots", key, ""); a.status != 200 || strings.TrimSpace(a.body) != "[]" {
		t.Errorf("GET /snapshots after a fork = %d %q, want none: a fork's image is no template", a.status, a.body)
	}
	for i, r := range res {
		if a := do(t, c, "DELETE", api+"/sandboxes/"+r.Sandbox.SandboxID, key, ""); a.status != 204 {
			t.Fatalf("kill fork %d = %d %q", i, a.status, a.body)
		}
		if imgs := snapshotImages(t, cli, "fork-"+src.ID()); len(imgs) != 1-i {
			t.Errorf("images of the fork after %d of 2 forks ended = %v, want %d", i+1, imgs, 1-i)
		}
	}

	cases := []struct {
		name, path, body string
		wantStatus       int
		wantBody         string
	}{
		{"unknown sandbox", "/sandboxes/nope/fork", `{}`, 404, `"code":404`},
		{"bad body", "/sandboxes/" + src.ID() + "/fork", `{"count":"two"}`, 400, "Error when parsing request"},
		{"count 0", "/sandboxes/" + src.ID() + "/fork", `{"count":0}`, 400, "Count must be at least 1"},
		{"count 101", "/sandboxes/" + src.ID() + "/fork", `{"count":101}`, 400, "Count cannot be greater than 100"},
		{"timeout 0", "/sandboxes/" + src.ID() + "/fork", `{"timeout":0}`, 400, "Timeout must be greater than 0"},
		{"timeout past the plan", "/sandboxes/" + src.ID() + "/fork", `{"timeout":360000}`, 400, "Timeout cannot be greater than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, c, "POST", api+tc.path, key, tc.body)
			if a.status != tc.wantStatus || !strings.Contains(a.body, tc.wantBody) {
				t.Errorf("POST %s %s = %d %q, want %d with %q", tc.path, tc.body, a.status, a.body, tc.wantStatus, tc.wantBody)
			}
		})
	}

	// No body: one fork, of the default timeout (15 s).
	a = do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/fork", key, "")
	res = nil
	if err := json.Unmarshal([]byte(a.body), &res); a.status != 201 || err != nil || len(res) != 1 || res[0].Sandbox == nil {
		t.Fatalf("fork without a body = %d %q, want 201 with one sandbox", a.status, a.body)
	}
	if left := time.Until(get(res[0].Sandbox.SandboxID).EndAt); left > 15*time.Second || left < 5*time.Second {
		t.Errorf("a fork without a timeout ends in %v, want 15 s", left)
	}
	do(t, c, "DELETE", api+"/sandboxes/"+res[0].Sandbox.SandboxID, key, "")

	// A paused sandbox is not forked, as on E2B: resume it first.
	if a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/pause", key, ""); a.status != 204 {
		t.Fatalf("pause = %d %q", a.status, a.body)
	}
	if a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/fork", key, `{}`); a.status != 409 || !strings.Contains(a.body, "is paused and cannot be forked") {
		t.Errorf("fork of a paused sandbox = %d %q, want 409", a.status, a.body)
	}
	if imgs := snapshotImages(t, cli, "fork-"+src.ID()); len(imgs) != 0 {
		t.Errorf("images left after every fork ended: %v", imgs)
	}
}

// TestServer_ForkLimit forks past the plan's sandbox limit: the call
// succeeds, the fork with no slot left an entry with a 429 error; a count
// the limit could never hold is refused whole.
func TestServer_ForkLimit(t *testing.T) {
	env := start(t, func(o *e2bemu.Options) { o.MaxSandboxes = 3 })
	v := env.Client(t)
	src := create(t, v, vendors.CreateSpec{})
	create(t, v, vendors.CreateSpec{})
	c := rawClient(env)
	api := "http://api." + env.Server.Domain()
	key := map[string]string{"X-API-Key": e2btest.APIKey}
	if a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/fork", key, `{"count":3}`); a.status != 400 ||
		!strings.Contains(a.body, "lower than the maximum number of concurrent sandboxes (3)") {
		t.Errorf("fork of 3 on a plan of 3 = %d %q, want 400", a.status, a.body)
	}
	a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/fork", key, `{"count":2,"timeout":60}`)
	var res []forkResult
	if err := json.Unmarshal([]byte(a.body), &res); a.status != 201 || err != nil || len(res) != 2 {
		t.Fatalf("fork = %d %q, want 201 with two results", a.status, a.body)
	}
	var made, refused int
	for _, r := range res {
		switch {
		case r.Sandbox != nil && r.Error == nil:
			made++
			t.Cleanup(func() { env.Server.Vanish(r.Sandbox.SandboxID) })
		case r.Error != nil && r.Sandbox == nil && r.Error.Code == 429 && strings.Contains(r.Error.Message, "maximum number of concurrent"):
			refused++
		default:
			t.Errorf("fork result %s, want a sandbox or a 429 error", a.body)
		}
	}
	if made != 1 || refused != 1 {
		t.Errorf("fork past the limit = %s, want one sandbox and one 429", a.body)
	}
}
