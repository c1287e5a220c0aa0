// Package vendortest is the behavioural suite every vendors.Vendor must
// pass (a test helper). A vendor's tests call Run with a vendor and an
// image built from the box image (its init enforces the lifetime; node
// serves the endpoint check).
package vendortest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/reaper"
)

// Config is what the suite needs of a vendor.
type Config struct {
	Vendor vendors.Vendor
	// Image is a box image the vendor can create boxes from.
	Image string
	// Describe returns everything the vendor exposes about a box and a
	// process in it (e.g. container and exec inspect data), for the check
	// that a spawned process's secrets appear nowhere in it.
	Describe func(t testing.TB, box vendors.Box, p vendors.Process) []byte
	// LifetimeSlack is how long after its deadline a box may still exist.
	// Default 15s.
	LifetimeSlack time.Duration
	// ShortLifetime is the lifetime of the box that must end by itself:
	// longer than the vendor takes to start a box under load. Default 5s.
	ShortLifetime time.Duration
}

// Run runs the suite.
func Run(t *testing.T, c Config) {
	if c.LifetimeSlack == 0 {
		c.LifetimeSlack = 15 * time.Second
	}
	if c.ShortLifetime == 0 {
		c.ShortLifetime = 5 * time.Second
	}
	t.Run("refuses a bad spec before any call", func(t *testing.T) { testSpec(t, c) })
	t.Run("box", func(t *testing.T) {
		t.Parallel()
		box := create(t, c, vendors.CreateSpec{Lifetime: 10 * time.Minute, Ports: []int{8080}})
		t.Run("status and list", func(t *testing.T) { testStatus(t, c, box) })
		t.Run("exec", func(t *testing.T) { testExec(t, box) })
		t.Run("exec cancel stops the command", func(t *testing.T) { testExecCancel(t, box) })
		t.Run("files", func(t *testing.T) { testFiles(t, box) })
		t.Run("spawn", func(t *testing.T) { testSpawn(t, c, box) })
		t.Run("spawn environment of any name", func(t *testing.T) { testSpawnEnvNames(t, box) })
		t.Run("endpoint", func(t *testing.T) { testEndpoint(t, box) })
		t.Run("destroy", func(t *testing.T) { testDestroy(t, c, box) })
	})
	t.Run("lifetime ends the box by itself", func(t *testing.T) {
		t.Parallel()
		life := c.ShortLifetime
		box := create(t, c, vendors.CreateSpec{Lifetime: life})
		id := box.ID()
		polltest.Until(t, life+c.LifetimeSlack, "box to end at its deadline", func() bool {
			_, err := c.Vendor.Connect(t.Context(), id)
			return errors.Is(err, vendors.ErrNotFound)
		})
	})
}

// RunTag returns a fresh run tag for a test.
func RunTag(t testing.TB) string {
	return "vt-" + strings.ToLower(rand.Text()[:12])
}

func create(t *testing.T, c Config, spec vendors.CreateSpec) vendors.Box {
	t.Helper()
	spec.Image, spec.RunTag = c.Image, RunTag(t)
	box, err := c.Vendor.Create(t.Context(), spec)
	if box != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := box.Destroy(ctx); err != nil {
				t.Errorf("cleanup: destroy %s: %v", box.ID(), err)
			}
		})
	}
	if err != nil {
		t.Fatalf("Create(%+v) = %v", spec, err)
	}
	return box
}

type countingVendor struct {
	vendors.Vendor
	calls int
}

func (v *countingVendor) Create(ctx context.Context, s vendors.CreateSpec) (vendors.Box, error) {
	v.calls++
	return v.Vendor.Create(ctx, s)
}

func testSpec(t *testing.T, c Config) {
	unsupported := vendors.Field("")
	all := []vendors.Field{vendors.FieldOwner, vendors.FieldLabels, vendors.FieldCPUs, vendors.FieldMemory,
		vendors.FieldPids, vendors.FieldDisk, vendors.FieldEnv, vendors.FieldPorts, vendors.FieldRuntime}
	for _, f := range all {
		if !c.Vendor.Supports()[f] {
			unsupported = f
			break
		}
	}
	good := vendors.CreateSpec{Image: c.Image, Lifetime: time.Minute, RunTag: RunTag(t)}
	cases := []struct {
		name string
		edit func(*vendors.CreateSpec)
		want func(error) bool
	}{
		{"no lifetime", func(s *vendors.CreateSpec) { s.Lifetime = 0 }, isSpec},
		{"lifetime over the maximum", func(s *vendors.CreateSpec) { s.Lifetime = vendors.MaxLifetime + time.Hour }, isSpec},
		{"no image", func(s *vendors.CreateSpec) { s.Image = "" }, isSpec},
		{"bad run tag", func(s *vendors.CreateSpec) { s.RunTag = "has space" }, isSpec},
		{"reserved label", func(s *vendors.CreateSpec) { s.Labels = map[string]string{boxmeta.LabelRunTag: "x"} }, isSpec},
		{"idle threshold without retention", func(s *vendors.CreateSpec) { s.Labels = map[string]string{boxmeta.LabelIdleSuspend: "1m0s"} }, isSpec},
		{"port out of range", func(s *vendors.CreateSpec) { s.Ports = []int{70000} }, isSpec},
	}
	if unsupported != "" {
		cases = append(cases, struct {
			name string
			edit func(*vendors.CreateSpec)
			want func(error) bool
		}{"unsupported " + string(unsupported), setField(unsupported), func(err error) bool {
			var u *vendors.UnsupportedError
			return errors.As(err, &u) && u.Field == unsupported && errors.Is(err, vendors.ErrUnsupported)
		}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			cv := &countingVendor{Vendor: c.Vendor}
			if err := vendors.Check(cv, s); !tc.want(err) {
				t.Errorf("Check = %v, want the typed refusal", err)
			}
			box, err := c.Vendor.Create(t.Context(), s)
			if box != nil {
				_ = box.Destroy(context.WithoutCancel(t.Context()))
				t.Fatalf("Create made box %s from a bad spec", box.ID())
			}
			if !tc.want(err) {
				t.Errorf("Create = %v, want the typed refusal", err)
			}
			if cv.calls != 0 {
				t.Errorf("Check called the vendor %d times", cv.calls)
			}
		})
	}
}

func isSpec(err error) bool {
	var s *vendors.SpecError
	return errors.As(err, &s)
}

func setField(f vendors.Field) func(*vendors.CreateSpec) {
	return func(s *vendors.CreateSpec) {
		switch f {
		case vendors.FieldOwner:
			s.Owner = "o"
		case vendors.FieldLabels:
			s.Labels = map[string]string{"a": "b"}
		case vendors.FieldCPUs:
			s.Resources.CPUs = 1
		case vendors.FieldMemory:
			s.Resources.MemoryBytes = 1 << 30
		case vendors.FieldPids:
			s.Resources.Pids = 100
		case vendors.FieldDisk:
			s.Resources.DiskBytes = 1 << 30
		case vendors.FieldEnv:
			s.Env = map[string]string{"A": "b"}
		case vendors.FieldPorts:
			s.Ports = []int{80}
		case vendors.FieldRuntime:
			s.Runtime = "runc"
		}
	}
}

func testStatus(t *testing.T, c Config, box vendors.Box) {
	info, err := box.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State != vendors.StateRunning || info.ID != box.ID() {
		t.Errorf("Status = %s %s, want %s running", info.ID, info.State, box.ID())
	}
	left := time.Until(info.Deadline)
	if left <= 0 || left > 10*time.Minute+2*time.Second {
		t.Errorf("deadline %v is %v away, want within the 10m lifetime", info.Deadline, left)
	}
	if d, ok := box.(vendors.Deadlined); ok {
		if at, known := d.KnownDeadline(); known && !at.Equal(info.Deadline) {
			t.Errorf("KnownDeadline = %v, want the deadline Status reads, %v", at, info.Deadline)
		}
	}
	for _, k := range []string{boxmeta.LabelManaged, boxmeta.LabelRunTag, boxmeta.LabelDeadline, boxmeta.LabelVersion} {
		if info.Labels[k] == "" {
			t.Errorf("label %s missing: %v", k, info.Labels)
		}
	}
	list, err := c.Vendor.List(t.Context(), map[string]string{boxmeta.LabelRunTag: info.RunTag()})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != box.ID() {
		t.Errorf("List(run tag) = %+v, want exactly %s", list, box.ID())
	}
	other, err := c.Vendor.List(t.Context(), map[string]string{boxmeta.LabelRunTag: "no-such-run-tag"})
	if err != nil || len(other) != 0 {
		t.Errorf("List(other run tag) = %v, %v; want none", other, err)
	}
	got, err := c.Vendor.Connect(t.Context(), box.ID())
	if err != nil || got.ID() != box.ID() {
		t.Errorf("Connect(%s) = %v, %v", box.ID(), got, err)
	}
	if _, err := c.Vendor.Connect(t.Context(), "boxctl-no-such-box"); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect(missing) = %v, want ErrNotFound", err)
	}
}

func testExec(t *testing.T, box vendors.Box) {
	cases := []struct {
		name       string
		spec       vendors.ExecSpec
		code       int
		out, errer string
	}{
		{"output", vendors.ExecSpec{Command: []string{"echo", "hello"}}, 0, "hello\n", ""},
		{"exit status", vendors.ExecSpec{Command: []string{"sh", "-c", "echo oops >&2; exit 3"}}, 3, "", "oops\n"},
		{"env", vendors.ExecSpec{Command: []string{"sh", "-c", `printf %s "$GREETING"`}, Env: map[string]string{"GREETING": "a b=c"}}, 0, "a b=c", ""},
		{"dir", vendors.ExecSpec{Command: []string{"pwd"}, Dir: "/tmp"}, 0, "/tmp\n", ""},
		{"stdin", vendors.ExecSpec{Command: []string{"cat"}, Stdin: strings.NewReader("from stdin")}, 0, "from stdin", ""},
		{"output cap", vendors.ExecSpec{Command: []string{"sh", "-c", "printf 0123456789"}, MaxOutput: 4}, 0, "0123", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := box.Exec(t.Context(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.code || string(res.Stdout) != tc.out || string(res.Stderr) != tc.errer {
				t.Errorf("Exec(%v) = %d %q %q, want %d %q %q", tc.spec.Command, res.ExitCode, res.Stdout, res.Stderr, tc.code, tc.out, tc.errer)
			}
		})
	}
}

func testExecCancel(t *testing.T, box vendors.Box) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	// The command and a child it started both go with the cancel.
	_, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c",
		"sleep 600 & echo $! >/tmp/vt-child.pid; echo $$ >/tmp/vt-cancel.pid; wait"}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec past its context = %v, want context.DeadlineExceeded", err)
	}
	polltest.Until(t, 20*time.Second, "the cancelled command and its child to end", func() bool {
		res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c",
			`! kill -0 "$(cat /tmp/vt-cancel.pid)" 2>/dev/null && ! kill -0 "$(cat /tmp/vt-child.pid)" 2>/dev/null`}})
		return err == nil && res.ExitCode == 0
	})
}

func testFiles(t *testing.T, box vendors.Box) {
	data := []byte("line one\nline two\x00binary\n")
	const p = "/tmp/vt/nested/dir/file.txt"
	if err := box.Write(t.Context(), p, data, 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := box.Read(t.Context(), p)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("Read(%s) = %q, %v; want %q", p, got, err, data)
	}
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", `[ "$(stat -c %u "$0")" = "$(id -u)" ] && stat -c %a "$0"`, p}})
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "640" {
		t.Errorf("written file: %v %d %q %q, want owned by the box user with mode 640", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if err := box.Write(t.Context(), p, []byte("replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := box.Read(t.Context(), p); string(got) != "replaced" {
		t.Errorf("Read after replace = %q", got)
	}
	if _, err := box.Read(t.Context(), "/tmp/vt/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := box.Read(t.Context(), "/tmp/vt"); err == nil {
		t.Error("Read(directory) succeeded")
	}
	if err := box.Write(t.Context(), "relative/path", nil, 0o644); err == nil {
		t.Error("Write(relative path) succeeded")
	}
}

func testSpawn(t *testing.T, c Config, box vendors.Box) {
	secret := "vt-secret-" + rand.Text()
	p, err := box.Spawn(t.Context(), vendors.SpawnSpec{Name: "vt-spawn",
		Command: []string{"sh", "-c", `echo "started $VT_SECRET_LEN"; echo err-line >&2; trap 'echo terminated; exit 143' TERM; while :; do sleep 0.1; done`},
		Env:     map[string]string{"VT_SECRET": secret, "VT_SECRET_LEN": strconv.Itoa(len(secret))}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := box.Spawn(t.Context(), vendors.SpawnSpec{Name: "vt-spawn", Command: []string{"true"}}); err == nil {
		t.Error("Spawn with a name in use succeeded")
	}
	// The process outlives the context it was spawned with.
	res, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"sh", "-c", `for f in /proc/[0-9]*/environ; do tr '\0' '\n' <"$f" 2>/dev/null; done | grep -c '^VT_SECRET=' || true`}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) == "0" {
		t.Errorf("the spawned process's environment lacks VT_SECRET: %v %q", err, res.Stdout)
	}
	if c.Describe != nil {
		if desc := c.Describe(t, box, p); bytes.Contains(desc, []byte(secret)) {
			t.Errorf("the vendor's description of the box shows the spawned process's secret")
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stdout, stderr, err := p.Output(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	defer stderr.Close()
	errC := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stderr)
		errC <- string(b)
	}()
	line := make([]byte, len("started ")+len(strconv.Itoa(len(secret)))+1)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "started "+strconv.Itoa(len(secret))+"\n" {
		t.Fatalf("stdout = %q, %v", line, err)
	}
	again, err := box.Process(t.Context(), p.ID())
	if err != nil {
		t.Fatalf("Process(%s) = %v", p.ID(), err)
	}
	if err := again.Signal(t.Context(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 143 {
		t.Errorf("Wait = %d, %v; want 143", code, err)
	}
	rest, _ := io.ReadAll(stdout)
	if string(rest) != "terminated\n" {
		t.Errorf("stdout after TERM = %q", rest)
	}
	if e := <-errC; e != "err-line\n" {
		t.Errorf("stderr = %q", e)
	}
	if out, errOut, err := again.Logs(ctx); err != nil || string(out) != "started "+strconv.Itoa(len(secret))+"\nterminated\n" || string(errOut) != "err-line\n" {
		t.Errorf("Logs = %q %q %v", out, errOut, err)
	}
	if code, err := again.Wait(ctx); err != nil || code != 143 {
		t.Errorf("Wait through Process(id) = %d, %v; want 143", code, err)
	}
	if err := again.Signal(t.Context(), syscall.SIGTERM); err != nil {
		t.Errorf("Signal after the end = %v, want nil", err)
	}
	if _, err := box.Process(t.Context(), "no-such-process"); err == nil {
		t.Error("Process(missing) succeeded")
	}
}

// testSpawnEnvNames spawns a process whose environment takes the short
// names a box script might use for its own variables: each reaches the
// process with its value, byte for byte, and none breaks the spawn.
func testSpawnEnvNames(t *testing.T, box vendors.Box) {
	env := map[string]string{"d": "1", "dl": "2", "wd": "3", "left": "4", "c": "5", "w": "6", "s": "7",
		"kv": "8", "v": "9", "p": "a b", "n": "line\nbreak\n", "i": "", "k": "=x="}
	names := slices.Sorted(maps.Keys(env))
	script := ""
	for _, k := range names {
		script += fmt.Sprintf(`printf '%%s=[%%s]\n' %s "$%s"; `, k, k)
	}
	p, err := box.Spawn(t.Context(), vendors.SpawnSpec{Name: "vt-env", Command: []string{"sh", "-c", script}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("Wait = %d, %v; want 0", code, err)
	}
	out, _, err := p.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, k := range names {
		want += k + "=[" + env[k] + "]\n"
	}
	if string(out) != want {
		t.Errorf("the spawned process's environment printed\n%s\nwant\n%s", out, want)
	}
}

func testEndpoint(t *testing.T, box vendors.Box) {
	_, err := box.Spawn(t.Context(), vendors.SpawnSpec{Command: []string{"node", "-e",
		`require("http").createServer((q, s) => s.end("pong " + q.url)).listen(8080, "0.0.0.0")`}})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := box.Endpoint(t.Context(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	client := ep.Client()
	var body string
	polltest.Until(t, 30*time.Second, "the box's server to answer at "+ep.URL, func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ep.URL+"/ping", nil)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200
	})
	if body != "pong /ping" {
		t.Errorf("GET /ping = %q", body)
	}
	if _, err := box.Endpoint(t.Context(), 9999); err == nil {
		t.Error("Endpoint(unexposed port) succeeded")
	}
}

func testDestroy(t *testing.T, c Config, box vendors.Box) {
	info, err := box.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := box.Destroy(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := box.Destroy(t.Context()); err != nil {
		t.Errorf("second Destroy = %v, want nil", err)
	}
	if _, err := c.Vendor.Connect(t.Context(), box.ID()); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect after Destroy = %v, want ErrNotFound", err)
	}
	if _, err := box.Status(t.Context()); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Status after Destroy = %v, want ErrNotFound", err)
	}
	if _, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"true"}}); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Exec after Destroy = %v, want ErrNotFound", err)
	}
	list, err := c.Vendor.List(t.Context(), map[string]string{boxmeta.LabelRunTag: info.RunTag()})
	if err != nil || len(list) != 0 {
		t.Errorf("List(run tag) after Destroy = %v, %v; want none", list, err)
	}
}

// ReapPastRetention runs gc over v's boxes of run tag as it would run
// after later (past the retention of suspended box id) and fails t unless
// it reaped exactly that box, as expired, and the box is gone.
func ReapPastRetention(t testing.TB, v vendors.Vendor, tag, id string, later time.Duration) {
	t.Helper()
	ctx := t.Context()
	reaped, err := reaper.Reap(ctx, v, reaper.Options{Filter: map[string]string{boxmeta.LabelRunTag: tag},
		Now: func() time.Time { return time.Now().Add(later) }})
	if err != nil || len(reaped) != 1 || reaped[0].Box.ID != id || reaped[0].Err != nil || reaped[0].Reason != reaper.ReasonExpired {
		t.Fatalf("gc %v later = %+v, %v; want box %s reaped as expired", later, reaped, err, id)
	}
	if _, err := v.Connect(ctx, id); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Connect after gc = %v, want ErrNotFound", err)
	}
}

// ReportLatency reports the median and p99 of lat, in ms, as b's
// p50-ms and p99-ms; no latency at all fails b.
func ReportLatency(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		b.Fatal("no operation was timed")
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	q := func(p float64) float64 { return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
