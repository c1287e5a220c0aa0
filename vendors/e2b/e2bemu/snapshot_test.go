package e2bemu_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
)

// TestServer_Snapshots takes snapshots of a running sandbox (unnamed and
// named), lists them, makes a sandbox of one (its disk the source's),
// refuses a paused sandbox's and a template's delete while a sandbox of it
// lives, and deletes them, their images with them.
func TestServer_Snapshots(t *testing.T) {
	env := start(t, nil)
	v := env.Client(t)
	src := create(t, v, vendors.CreateSpec{})
	ctx := t.Context()
	if err := src.Write(ctx, "/tmp/snap/kept.txt", []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := rawClient(env)
	api := "http://api." + env.Server.Domain()
	key := map[string]string{"X-API-Key": e2btest.APIKey}
	type info struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	snapshot := func(body string) info {
		t.Helper()
		a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/snapshots", key, body)
		var in info
		if err := json.Unmarshal([]byte(a.body), &in); a.status != 201 || err != nil || in.Names == nil {
			t.Fatalf("snapshot %s = %d %q, want 201 with SnapshotInfo", body, a.status, a.body)
		}
		return in
	}
	unnamed := snapshot(`{}`)
	tplID, tag, _ := strings.Cut(unnamed.SnapshotID, ":")
	if tag != "default" || len(unnamed.Names) != 0 {
		t.Errorf("unnamed snapshot = %+v, want <templateID>:default and no names", unnamed)
	}
	named := snapshot(`{"name":"fork-base"}`)
	if named.SnapshotID != "fork-base:default" || len(named.Names) != 1 || named.Names[0] != "fork-base" {
		t.Errorf("named snapshot = %+v, want fork-base:default named fork-base", named)
	}
	if again := snapshot(`{"name":"fork-base"}`); again.SnapshotID != named.SnapshotID {
		t.Errorf("a second snapshot named fork-base = %+v, want %s again", again, named.SnapshotID)
	}
	a := do(t, c, "POST", api+"/v2/sandboxes", key, `{"templateID":"fork-base","timeout":60}`)
	var byName struct{ SandboxID, TemplateID string }
	if err := json.Unmarshal([]byte(a.body), &byName); a.status != 201 || err != nil || byName.TemplateID == "" {
		t.Fatalf("create from fork-base = %d %q, want 201", a.status, a.body)
	}
	if a := do(t, c, "DELETE", api+"/sandboxes/"+byName.SandboxID, key, ""); a.status != 204 {
		t.Fatalf("kill %s = %d %q", byName.SandboxID, a.status, a.body)
	}
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if imgs := snapshotImages(t, cli, byName.TemplateID); len(imgs) != 2 {
		t.Errorf("images of fork-base = %v, want one of each snapshot", imgs)
	}
	if st, err := src.Status(ctx); err != nil || st.State != vendors.StateRunning {
		t.Errorf("source is %+v, %v after its snapshots, want running", st, err)
	}

	a = do(t, c, "GET", api+"/snapshots?sandboxID="+src.ID(), key, "")
	var list []info
	if err := json.Unmarshal([]byte(a.body), &list); a.status != 200 || err != nil || len(list) != 2 {
		t.Fatalf("GET /snapshots = %d %q, want both snapshots", a.status, a.body)
	}
	if a := do(t, c, "GET", api+"/snapshots?limit=1&name=fork-base", key, ""); a.status != 200 ||
		!strings.Contains(a.body, `"snapshotID":"fork-base:default"`) || a.header.Get("X-Next-Token") != "" {
		t.Errorf("GET /snapshots?name=fork-base = %d %q, want the named one alone", a.status, a.body)
	}

	// A sandbox of the snapshot runs the source's disk.
	a = do(t, c, "POST", api+"/v2/sandboxes", key, `{"templateID":"`+unnamed.SnapshotID+`","timeout":60}`)
	var made struct{ SandboxID, TemplateID string }
	if err := json.Unmarshal([]byte(a.body), &made); a.status != 201 || err != nil || made.TemplateID != tplID {
		t.Fatalf("create from %s = %d %q, want 201 of template %s", unnamed.SnapshotID, a.status, a.body, tplID)
	}
	fork, err := v.Connect(ctx, made.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fork.Destroy(ctx) })
	if got, err := fork.Read(ctx, "/tmp/snap/kept.txt"); err != nil || string(got) != "kept\n" {
		t.Errorf("the snapshot's sandbox reads %q, %v; want the source's file", got, err)
	}

	cases := []struct {
		name, method, path, body string
		wantStatus               int
		wantBody                 string
	}{
		{"unknown tag", "POST", "/v2/sandboxes", `{"templateID":"fork-base:v9"}`, 404, "tag 'v9' does not exist for template 'fork-base'"},
		{"unknown sandbox", "POST", "/sandboxes/nope/snapshots", `{}`, 404, `"code":404`},
		{"bad name", "POST", "/sandboxes/" + src.ID() + "/snapshots", `{"name":"a:b c"}`, 400, "Invalid name"},
		{"template in use", "DELETE", "/templates/" + unnamed.SnapshotID, "", 400, "running sandboxes using it"},
		{"named template", "DELETE", "/templates/fork-base", "", 204, ""},
		{"deleted template", "DELETE", "/templates/fork-base", "", 404, "template 'fork-base' not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, c, tc.method, api+tc.path, key, tc.body)
			if a.status != tc.wantStatus || !strings.Contains(a.body, tc.wantBody) {
				t.Errorf("%s %s = %d %q, want %d with %q", tc.method, tc.path, a.status, a.body, tc.wantStatus, tc.wantBody)
			}
		})
	}

	// A paused sandbox is no live sandbox to snapshot, as on E2B.
	if a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/pause", key, ""); a.status != 204 {
		t.Fatalf("pause = %d %q", a.status, a.body)
	}
	if a := do(t, c, "POST", api+"/sandboxes/"+src.ID()+"/snapshots", key, `{}`); a.status != 404 {
		t.Errorf("snapshot of a paused sandbox = %d %q, want 404", a.status, a.body)
	}

	// Once its sandbox is gone the template deletes, its image with it.
	if err := fork.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if a := do(t, c, "DELETE", api+"/templates/"+unnamed.SnapshotID, key, ""); a.status != 204 {
		t.Fatalf("delete the unused snapshot = %d %q, want 204", a.status, a.body)
	}
	for _, id := range []string{tplID, byName.TemplateID} {
		if left := snapshotImages(t, cli, id); len(left) != 0 {
			t.Errorf("images %v are left after their template's delete", left)
		}
	}
	if a := do(t, c, "GET", api+"/snapshots", key, ""); a.status != 200 || strings.TrimSpace(a.body) != "[]" {
		t.Errorf("GET /snapshots after the deletes = %d %q, want none", a.status, a.body)
	}
}

// snapshotImages returns the emulator's images of template tplID.
func snapshotImages(t *testing.T, cli *client.Client, tplID string) []string {
	t.Helper()
	imgs, err := cli.ImageList(t.Context(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", "e2bemu-snapshot:"+tplID+"-*"))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range imgs {
		out = append(out, img.RepoTags...)
	}
	return out
}
