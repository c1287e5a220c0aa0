package e2bemu_test

import (
	_ "embed"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/e2btest"
	"github.com/tangle-network/boxctl/internal/jssdk"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/e2b/e2bemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

//go:embed testdata/sdk-scenario.mjs
var sdkScenario []byte

//go:embed testdata/sdk-faults.mjs
var sdkFaults []byte

// sdkSteps is how many steps sdk-scenario.mjs runs.
const sdkSteps = 35

// TestSDK_Scenario runs the official SDK (npm e2b, pinned in
// internal/jssdk) through its documented calls against the emulator, with
// only the environment SDKEnv gives (as `boxctl emulate e2b` prints it).
// Each step of the script is a subtest that fails unless the call gave
// its documented result.
func TestSDK_Scenario(t *testing.T) {
	in := jssdk.Require(t, "e2b")
	env := start(t, nil)
	out, err := in.Run(t.Context(), jssdk.RunOptions{Script: sdkScenario,
		Env:  e2bemu.SDKEnv("http://"+env.Addr, env.Server.Domain(), e2btest.APIKey),
		Args: []string{"box", vendortest.RunTag(t)}})
	if err != nil {
		t.Errorf("scenario: %v", err)
	}
	if out == nil {
		t.FailNow()
	}
	steps, err := out.Steps()
	if err != nil {
		t.Fatal(err)
	}
	passed := 0
	for _, st := range steps {
		t.Run(st.Step, func(t *testing.T) {
			if !st.OK {
				detail, _ := json.Marshal(st.Detail)
				t.Errorf("%s: not the documented result (%.0f ms): %s", st.Step, st.MS, detail)
				return
			}
			passed++
		})
	}
	t.Logf("SDK scenario: %d of %d steps passed (%d planned); create through the SDK took %.0f ms",
		passed, len(steps), sdkSteps, createMS(steps))
	if len(steps) != sdkSteps || !strings.Contains(string(out.Lines[len(out.Lines)-1]), `"done":true`) {
		t.Errorf("the scenario ran %d steps, want %d to the end; stderr:\n%s", len(steps), sdkSteps, out.Stderr)
	}
}

func createMS(steps []jssdk.Step) float64 {
	for _, st := range steps {
		if st.Step == "create" {
			return st.MS
		}
	}
	return 0
}

// TestGoClient_Scenario runs the steps of the SDK scenario that map onto
// our client (vendors.Vendor): create, exec with env and cwd, exit codes,
// files, list by label, destroy.
func TestGoClient_Scenario(t *testing.T) {
	env := start(t, nil)
	v := env.Client(t)
	tag := vendortest.RunTag(t)
	begin := time.Now()
	box, err := v.Create(t.Context(), vendors.CreateSpec{Image: "box", Lifetime: 5 * time.Minute, RunTag: tag,
		Env: map[string]string{"GREETING": "hello"}, Labels: map[string]string{"suite": "go-scenario"}})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Since(begin)
	t.Cleanup(func() { _ = box.Destroy(t.Context()) })
	t.Logf("create through the Go client took %d ms", created.Milliseconds())
	exec := func(t *testing.T, spec vendors.ExecSpec) vendors.ExecResult {
		t.Helper()
		res, err := box.Exec(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	t.Run("exec: create env, the image user", func(t *testing.T) {
		res := exec(t, vendors.ExecSpec{Command: []string{"sh", "-c", `echo "$GREETING"; id -un`}})
		if got := string(res.Stdout); res.ExitCode != 0 || !strings.HasPrefix(got, "hello\n") || strings.HasSuffix(got, "root\n") {
			t.Errorf("exec = %d %q, want hello and the image's user", res.ExitCode, got)
		}
	})
	t.Run("exec: env and cwd", func(t *testing.T) {
		res := exec(t, vendors.ExecSpec{Command: []string{"sh", "-c", `echo "$X"; pwd`}, Env: map[string]string{"X": "y"}, Dir: "/tmp"})
		if string(res.Stdout) != "y\n/tmp\n" {
			t.Errorf("exec = %q, want y and /tmp", res.Stdout)
		}
	})
	t.Run("exec: exit code", func(t *testing.T) {
		if res := exec(t, vendors.ExecSpec{Command: []string{"sh", "-c", "echo err >&2; exit 3"}}); res.ExitCode != 3 || string(res.Stderr) != "err\n" {
			t.Errorf("exec = %d %q, want 3 and err", res.ExitCode, res.Stderr)
		}
	})
	t.Run("files: write and read", func(t *testing.T) {
		if err := box.Write(t.Context(), "/tmp/go/a.txt", []byte("hello file"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := box.Read(t.Context(), "/tmp/go/a.txt")
		if err != nil || string(got) != "hello file" {
			t.Errorf("Read = %q, %v", got, err)
		}
		if _, err := box.Read(t.Context(), "/tmp/go/missing"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Read(missing) = %v, want not exist", err)
		}
	})
	t.Run("list by label", func(t *testing.T) {
		got, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag})
		if err != nil || len(got) != 1 || got[0].ID != box.ID() {
			t.Errorf("List(run tag) = %v, %v; want the box", got, err)
		}
	})
	t.Run("destroy", func(t *testing.T) {
		if err := box.Destroy(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Connect(t.Context(), box.ID()); !errors.Is(err, vendors.ErrNotFound) {
			t.Errorf("Connect after Destroy = %v, want not found", err)
		}
	})
}

// TestSDK_Faults shows the official SDK's own retries against the fault
// switches: half the control plane's answers are 429 (with Retry-After)
// or 503, half the failed creates having made their sandbox. The SDK retries
// the 429s (fewer RateLimitErrors reach the caller than 429s were
// served), throws 503s as ServiceBusyError, and the sandboxes of lost
// creates are there for a metadata list to find. 32 creates make a run
// that serves no 429 at all rare (each failure is a 429 or a 503).
func TestSDK_Faults(t *testing.T) {
	in := jssdk.Require(t, "e2b")
	env := start(t, nil)
	env.Server.SetFaults(e2bemu.Faults{ErrorRate: 0.5, LostRate: 0.5})
	var served429, served503 atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w}
		env.Server.ServeHTTP(rec, r)
		if r.Method == http.MethodPost && r.URL.Path == "/v2/sandboxes" {
			switch rec.status {
			case http.StatusTooManyRequests:
				served429.Add(1)
			case http.StatusServiceUnavailable:
				served503.Add(1)
			}
		}
	}))
	t.Cleanup(srv.Close)
	const creates = 32
	run := vendortest.RunTag(t)
	out, err := in.Run(t.Context(), jssdk.RunOptions{Script: sdkFaults,
		Env:  e2bemu.SDKEnv(srv.URL, env.Server.Domain(), e2btest.APIKey),
		Args: []string{"box", run, strconv.Itoa(creates)}})
	if err != nil {
		t.Fatalf("faults script: %v", err)
	}
	var sum struct {
		Seen                 struct{ OK, RateLimited, Busy, Other int }
		Made, Listed, Killed []string
	}
	if err := json.Unmarshal(out.Lines[len(out.Lines)-1], &sum); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d creates through the SDK: %d ok, %d RateLimitError, %d ServiceBusyError, %d other; served %d 429s and %d 503s; "+
		"%d sandboxes listed (%d from lost creates)", creates, sum.Seen.OK, sum.Seen.RateLimited, sum.Seen.Busy, sum.Seen.Other,
		served429.Load(), served503.Load(), len(sum.Listed), len(sum.Listed)-len(sum.Made))
	if sum.Seen.Other != 0 || sum.Seen.OK+sum.Seen.RateLimited+sum.Seen.Busy != creates {
		t.Errorf("outcomes %+v: want every create ok or a typed RateLimitError / ServiceBusyError", sum.Seen)
	}
	if served429.Load() == 0 || int64(sum.Seen.RateLimited) >= served429.Load() {
		t.Errorf("%d RateLimitErrors from %d 429s served: the SDK should have retried the 429s", sum.Seen.RateLimited, served429.Load())
	}
	if int64(sum.Seen.Busy) != served503.Load() {
		t.Errorf("%d ServiceBusyErrors from %d 503s served: the SDK does not retry a 503", sum.Seen.Busy, served503.Load())
	}
	for _, id := range sum.Made {
		if !slices.Contains(sum.Listed, id) {
			t.Errorf("sandbox %s made by a create is not listed by its metadata", id)
		}
	}
	if len(sum.Killed) != len(sum.Listed) {
		t.Errorf("killed %d of the %d listed sandboxes", len(sum.Killed), len(sum.Listed))
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// TestSDK_READMEExample runs the README's JavaScript example as printed,
// with the exports and the "base" template it sets up.
func TestSDK_READMEExample(t *testing.T) {
	in := jssdk.Require(t, "e2b")
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "cat >demo.mjs <<'JS'\n")
	script, _, ok2 := strings.Cut(rest, "\nJS\n")
	if !ok || !ok2 {
		t.Fatal("README.md has no demo.mjs example")
	}
	img := boxtest.Pushed(t, boxtest.Options{})
	env := e2btest.Start(t, func(o *e2bemu.Options) { o.Templates = map[string]string{"base": img} })
	out, err := in.Run(t.Context(), jssdk.RunOptions{Script: []byte(script),
		Env: e2bemu.SDKEnv("http://"+env.Addr, env.Server.Domain(), e2btest.APIKey)})
	if err != nil {
		t.Fatalf("README example: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.Text), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^hello from \S+ in /\S* 0$`).MatchString(lines[0]) ||
		!strings.HasPrefix(lines[1], "hi [") || !strings.Contains(lines[1], "'hello.txt'") {
		t.Errorf("README example printed %q, want the greeting with exit code 0, then the file and its listing", out.Text)
	}
	if left := env.Server.Sandboxes(); len(left) != 0 {
		t.Errorf("sandboxes left after the example's kill: %v", left)
	}
}
