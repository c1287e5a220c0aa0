package vendors_test

// This file is a vendor written as one outside this module writes it: it
// imports only public packages (vendors, its process layer
// vendors/boxproc and its labels vendors/boxmeta), which
// TestOutsideVendor_Imports checks, so the Go toolchain's rule on internal
// packages would let another module hold it. Its boxes are this machine,
// reached through a local streaming exec, the one primitive the process
// layer asks of a vendor: vendors.NewProcs over it gives every box Spawn,
// Process, Read and Write.

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/boxproc"
)

// hostVendor makes boxes that are this machine, labelled as every vendor
// labels its boxes.
type hostVendor struct {
	mu    sync.Mutex
	boxes map[string]vendors.Info
}

var (
	_ vendors.Vendor = (*hostVendor)(nil)
	_ vendors.Box    = (*hostBox)(nil)
)

func (v *hostVendor) Name() string { return "host" }

func (v *hostVendor) Supports() vendors.Fields {
	return vendors.NewFields(vendors.FieldOwner, vendors.FieldLabels)
}

func (v *hostVendor) Create(_ context.Context, spec vendors.CreateSpec) (vendors.Box, error) {
	if err := vendors.Check(v, spec); err != nil {
		return nil, err
	}
	now := time.Now()
	tag, err := vendors.Tag(v.Name(), spec, now, "v0.0.0-example")
	if err != nil {
		return nil, err
	}
	deadline, err := boxmeta.ParseDeadline(tag.Labels[boxmeta.LabelDeadline])
	if err != nil {
		return nil, err
	}
	info := vendors.Info{ID: "host-" + tag.Token, Vendor: v.Name(), State: vendors.StateRunning, Image: spec.Image,
		Labels: tag.Labels, Created: now, Deadline: deadline}
	v.mu.Lock()
	v.boxes[info.ID] = info
	v.mu.Unlock()
	return v.box(info.ID), nil
}

func (v *hostVendor) Connect(ctx context.Context, id string) (vendors.Box, error) {
	b := v.box(id)
	if _, err := b.Status(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (v *hostVendor) List(_ context.Context, filter map[string]string) ([]vendors.Info, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []vendors.Info
	for _, id := range slices.Sorted(maps.Keys(v.boxes)) {
		if vendors.HasLabels(v.boxes[id].Labels, filter) {
			out = append(out, v.boxes[id])
		}
	}
	return out, nil
}

func (v *hostVendor) box(id string) *hostBox {
	return &hostBox{Procs: vendors.NewProcs(v.Name(), runHere), v: v, id: id}
}

// hostBox is one of hostVendor's boxes: the process layer's methods, and
// the rest of vendors.Box written here.
type hostBox struct {
	vendors.Procs
	v  *hostVendor
	id string
}

func (b *hostBox) ID() string { return b.id }

func (b *hostBox) Status(context.Context) (vendors.Info, error) {
	b.v.mu.Lock()
	defer b.v.mu.Unlock()
	info, ok := b.v.boxes[b.id]
	if !ok {
		return vendors.Info{}, &vendors.NotFoundError{Vendor: b.v.Name(), ID: b.id}
	}
	return info, nil
}

func (b *hostBox) Exec(ctx context.Context, spec vendors.ExecSpec) (vendors.ExecResult, error) {
	if len(spec.Env) > 0 || spec.Dir != "" {
		return vendors.ExecResult{}, errors.New("host: exec: no environment or directory of its own")
	}
	return vendors.StreamExec(ctx, b.v.Name(), spec, func(ctx context.Context, stdout, stderr io.Writer) (int, error) {
		return runHere(ctx, boxproc.Command{Op: "exec", Argv: spec.Command, Stdin: spec.Stdin, Stdout: stdout, Stderr: stderr})
	})
}

func (b *hostBox) Endpoint(context.Context, int) (vendors.Endpoint, error) {
	return vendors.Endpoint{}, fmt.Errorf("host: box %s exposes no port", b.id)
}

func (b *hostBox) Destroy(context.Context) error {
	b.v.mu.Lock()
	defer b.v.mu.Unlock()
	delete(b.v.boxes, b.id)
	return nil
}

// runHere is the vendor's streaming exec (a boxproc.RunnerFunc): the
// command runs on this machine in a session of its own, killed whole when
// ctx ends.
func runHere(ctx context.Context, c boxproc.Command) (int, error) {
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Stdin, c.Stdout, c.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return 0, err
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return exit.ExitCode(), nil
}

func TestOutsideVendor(t *testing.T) {
	ctx := t.Context()
	v := &hostVendor{boxes: map[string]vendors.Info{}}
	b, err := v.Create(ctx, vendors.CreateSpec{Image: "host", Lifetime: time.Minute, RunTag: "outside",
		Labels: map[string]string{"team": "infra"}})
	if err != nil {
		t.Fatalf("Create = %v", err)
	}
	infos, err := v.List(ctx, map[string]string{boxmeta.LabelManaged: "true", boxmeta.LabelRunTag: "outside"})
	if err != nil || len(infos) != 1 || infos[0].ID != b.ID() || infos[0].Labels["team"] != "infra" {
		t.Errorf("List(managed, run tag) = %v, %v; want box %s with its own label", infos, err, b.ID())
	}

	file := filepath.Join(t.TempDir(), "dir", "note")
	if err := b.Write(ctx, file, []byte("hello\n"), 0o600); err != nil {
		t.Fatalf("Write(%s) = %v", file, err)
	}
	if got, err := b.Read(ctx, file); err != nil || string(got) != "hello\n" {
		t.Errorf("Read(%s) = %q, %v; want %q", file, got, err, "hello\n")
	}
	res, err := b.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", "cat; echo err >&2; exit 3"}, Stdin: strings.NewReader("in")})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "in" || string(res.Stderr) != "err\n" {
		t.Errorf("Exec = %+v, %v; want exit 3, stdout %q, stderr %q", res, err, "in", "err\n")
	}

	if err := b.Destroy(ctx); err != nil {
		t.Fatalf("Destroy = %v", err)
	}
	if _, err := v.Connect(ctx, b.ID()); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect(destroyed) = %v, want ErrNotFound", err)
	}
}

// TestOutsideVendor_Imports keeps the example honest: it imports nothing
// of this module that another module could not.
func TestOutsideVendor_Imports(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "outside_vendor_test.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if slices.Contains(strings.Split(path, "/"), "internal") {
			t.Errorf("the outside vendor imports %s, which another module cannot", path)
		}
	}
}
