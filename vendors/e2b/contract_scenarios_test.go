package e2b_test

import (
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/e2b"
)

var createSpec = vendors.CreateSpec{Image: "tpl", Lifetime: 10 * time.Minute, RunTag: "run1", Ports: []int{8080},
	Labels: map[string]string{"team": "a"}, Env: map[string]string{"A": "b"}}

const sandboxID = "ixh8xb1qgl5gpuzukpcgt"

func TestContract_Create(t *testing.T) {
	_, v := newReplay(t, "create")
	box, err := v.Create(t.Context(), createSpec)
	if err != nil {
		t.Fatal(err)
	}
	if box.ID() != sandboxID {
		t.Errorf("ID() = %s, want %s", box.ID(), sandboxID)
	}
	ep, err := box.Endpoint(t.Context(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	if ep.URL != "http://8080-"+sandboxID+".e2b.app" || ep.Header.Get("e2b-traffic-access-token") != "traffic-token" {
		t.Errorf("Endpoint(8080) = %s %v, want the sandbox host with the traffic token", ep.URL, ep.Header)
	}
	if _, err := box.Endpoint(t.Context(), 9999); err == nil {
		t.Error("Endpoint(9999), a port not asked for, succeeded")
	}
}

func TestContract_List(t *testing.T) {
	_, v := newReplay(t, "list-paged")
	got, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "sbxa" || got[1].ID != "sbxb" {
		t.Fatalf("List() = %+v, want sbxa then sbxb (oldest first) from both pages", got)
	}
	i := got[0]
	if i.State != vendors.StateRunning || i.Vendor != "e2b" || i.Image != "tpl" || i.RunTag() != "r1" ||
		!i.Created.Equal(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)) || i.Deadline.Unix() != 1893456000 {
		t.Errorf("List()[0] = %+v", i)
	}
}

func TestContract_NotFound(t *testing.T) {
	_, v := newReplay(t, "not-found")
	if _, err := v.Connect(t.Context(), "gone"); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect(gone) = %v, want ErrNotFound", err)
	}
	b := mustBox(t, v)
	for i := range 2 {
		if err := b.Destroy(t.Context()); err != nil {
			t.Errorf("Destroy #%d = %v, want nil", i+1, err)
		}
	}
}

// mustBox returns a box of the sandbox without a call (Connect makes two).
func mustBox(t *testing.T, v *e2b.Vendor) vendors.Box {
	t.Helper()
	return e2b.BoxOf(v, sandboxID)
}

func TestContract_Exec(t *testing.T) {
	_, v := newReplay(t, "exec")
	box, err := v.Connect(t.Context(), sandboxID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", "echo hi; echo err >&2; exit 3"},
		Env: map[string]string{"K": "v"}, Dir: "/tmp"})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "hi\n" || string(res.Stderr) != "err\n" {
		t.Errorf("Exec = %+v, %v; want 3 \"hi\\n\" \"err\\n\"", res, err)
	}
	if res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sleep", "9"}}); err != nil || res.ExitCode != 137 {
		t.Errorf("Exec(killed) = %+v, %v; want exit status 137", res, err)
	}
	_, err = box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"nope"}})
	var ce *e2b.ConnectError
	if !errors.As(err, &ce) || ce.Code != "invalid_argument" {
		t.Errorf("Exec(nope) = %v, want the end-of-stream error invalid_argument", err)
	}
	_, err = box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"true"}})
	var ge *vendors.GoneError
	if !errors.As(err, &ge) || !errors.Is(err, vendors.ErrNotFound) || ge.ID != sandboxID {
		t.Errorf("Exec on a gone sandbox = %v, want a *vendors.GoneError", err)
	}
}

func TestContract_Files(t *testing.T) {
	_, v := newReplay(t, "files")
	box, err := v.Connect(t.Context(), sandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Write(t.Context(), "/tmp/a/b.txt", []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := box.Read(t.Context(), "/tmp/a/b.txt"); err != nil || string(got) != "data" {
		t.Errorf("Read = %q, %v", got, err)
	}
	if _, err := box.Read(t.Context(), "/tmp/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := box.Read(t.Context(), "/tmp"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(directory) = %v, want an error", err)
	}
}

func TestContract_CreateLost(t *testing.T) {
	_, v := newReplay(t, "create-lost")
	box, err := v.Create(t.Context(), createSpec)
	if err != nil || box.ID() != sandboxID {
		t.Fatalf("Create after a lost answer = %v, %v; want the sandbox the first attempt made", box, err)
	}
}

func TestContract_CreateDuplicate(t *testing.T) {
	_, v := newReplay(t, "create-duplicate")
	box, err := v.Create(t.Context(), createSpec)
	if err != nil || box.ID() != "sbx2" {
		t.Fatalf("Create = %v, %v; want sbx2, with the late duplicate killed", box, err)
	}
}

func TestContract_RateLimited(t *testing.T) {
	_, v := newReplay(t, "rate-limited")
	_, err := v.Create(t.Context(), createSpec)
	var rl *vendors.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Second || rl.Quota {
		t.Fatalf("Create = %v, want a *vendors.RateLimitError asking for 1s", err)
	}
}

func TestContract_Template(t *testing.T) {
	_, v := newReplay(t, "template")
	var lines []string
	img, err := v.ImportImage(t.Context(), vendors.ImportRequest{Image: "123456789012.dkr.ecr.us-east-1.amazonaws.com/box:v1",
		Name: "box", Resources: vendors.Resources{CPUs: 2, MemoryBytes: 1 << 30},
		Pull:     vendors.RegistryCredentials{AWSAccessKeyID: "AKIAEXAMPLE", AWSSecretAccessKey: "secret", AWSRegion: "us-east-1"},
		Progress: func(l string) { lines = append(lines, l) }})
	if err != nil || img.Reference != "tpl1" || len(lines) != 2 {
		t.Fatalf("ImportImage = %+v, %v, log %q; want template tpl1 and two log lines", img, err, lines)
	}
}
