package daytona_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/jssdk"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// sdkScenario is the official SDK's scenario: its documented calls, each
// checked for its documented result.
//
//go:embed testdata/sdk/scenario.mjs
var sdkScenario []byte

// runSDK runs the scenario with the pinned official SDK against emu and
// reports every step as a subtest; it returns the steps.
func runSDK(t *testing.T, emu *daytonaemu.Server, extra map[string]string) []jssdk.Step {
	t.Helper()
	in := jssdk.Require(t, "daytona")
	env := map[string]string{"DAYTONA_API_URL": emu.APIURL(), "DAYTONA_API_KEY": apiKey, "DAYTONA_TARGET": daytonaemu.Target,
		"SCENARIO_SNAPSHOT": snapshotName, "SCENARIO_RUN": vendortest.RunTag(t)}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	out, err := in.Run(ctx, jssdk.RunOptions{Script: sdkScenario, Env: env})
	if out == nil {
		t.Fatal(err)
	}
	steps, serr := out.Steps()
	if serr != nil {
		t.Fatal(serr)
	}
	passed := 0
	for _, s := range steps {
		t.Run(s.Step, func(t *testing.T) {
			d, _ := json.Marshal(s.Detail)
			if !s.OK {
				t.Errorf("%s: not the documented result (%.0f ms): %s", s.Step, s.MS, d)
				return
			}
			passed++
			t.Logf("%.0f ms: %s", s.MS, d)
		})
	}
	t.Logf("official SDK scenario: %d of %d steps passed", passed, len(steps))
	if err != nil && passed == len(steps) {
		t.Errorf("the scenario failed outside its steps: %v\n%s", err, out.Text)
	}
	return steps
}

// TestSDK_Scenario runs the official JavaScript SDK (@daytonaio/sdk,
// pinned with its integrity) through its documented surface against the
// emulator: create from a snapshot and from an image, process, sessions,
// code run, the file system, git against a local bare repository,
// preview links, stop, start, archive, snapshots, a snapshot of the
// sandbox and a sandbox made from it, the refused fork of a container
// sandbox, the events channel and the typed 501s. The sandbox from an
// image is built by the engine's own BuildKit: no buildkitd is named.
func TestSDK_Scenario(t *testing.T) {
	env := testbed.Require(t)
	t.Setenv("BUILDKIT_HOST", "")
	emu, _ := emulator(t, daytonaemu.Options{})
	steps := runSDK(t, emu, map[string]string{"SCENARIO_IMAGE": env.BaseImage})
	for _, s := range steps {
		if s.Step == "create from snapshot" {
			t.Logf("create through the SDK: %.0f ms", s.MS)
		}
	}
	if len(steps) < 40 {
		t.Errorf("%d steps ran, want the whole scenario", len(steps))
	}
}

// TestSDK_Faults shows the SDK's own retry behaviour against the
// emulator's fault injection: it retries only connections never made, so
// a 429 or 503 reaches its caller as DaytonaRateLimitError or
// DaytonaServiceUnavailableError (where our client retries them).
func TestSDK_Faults(t *testing.T) {
	emu, _ := emulator(t, daytonaemu.Options{Faults: daytonaemu.Faults{ErrorRate: 0.3}})
	steps := runSDK(t, emu, map[string]string{"SCENARIO": "faults"})
	if len(steps) != 2 {
		t.Errorf("%d fault steps ran, want 2", len(steps))
	}
}

// TestSDK_GoClientScenario runs the SDK scenario's steps that map onto
// vendors.Box with our client, against the same emulator: create from
// the snapshot, status, list by labels, exec (exit status, environment,
// work directory), files, a spawned process and its logs, a preview
// endpoint, delete.
func TestSDK_GoClientScenario(t *testing.T) {
	_, v := emulator(t, daytonaemu.Options{})
	tag := vendortest.RunTag(t)
	start := time.Now()
	box, err := v.Create(t.Context(), vendors.CreateSpec{Image: snapshotName, RunTag: tag, Lifetime: 10 * time.Minute,
		Env: map[string]string{"SCENARIO_GREETING": "hello"}, Ports: []int{3000}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("create through our Go client: %d ms", time.Since(start).Milliseconds())
	defer box.Destroy(context.WithoutCancel(t.Context()))
	ctx := t.Context()
	steps := []struct {
		name string
		run  func() error
	}{
		{"get", func() error {
			i, err := box.Status(ctx)
			return want(err == nil && i.State == vendors.StateRunning, "status %+v, %v", i, err)
		}},
		{"list by labels", func() error {
			l, err := v.List(ctx, map[string]string{boxmeta.LabelRunTag: tag})
			return want(err == nil && len(l) == 1 && l[0].ID == box.ID(), "list %+v, %v", l, err)
		}},
		{"execute command", func() error {
			r, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"sh", "-c", `echo "$SCENARIO_GREETING" world; exit 3`}})
			return want(err == nil && r.ExitCode == 3 && string(r.Stdout) == "hello world\n", "exec %+v, %v", r, err)
		}},
		{"execute in cwd", func() error {
			r, err := box.Exec(ctx, vendors.ExecSpec{Command: []string{"pwd"}, Dir: "/tmp"})
			return want(err == nil && string(r.Stdout) == "/tmp\n", "exec %+v, %v", r, err)
		}},
		{"fs upload and download", func() error {
			if err := box.Write(ctx, "/tmp/scenario/a.txt", []byte("alpha\nbeta\n"), 0o600); err != nil {
				return err
			}
			b, err := box.Read(ctx, "/tmp/scenario/a.txt")
			return want(err == nil && string(b) == "alpha\nbeta\n", "read %q, %v", b, err)
		}},
		{"session async command and logs", func() error {
			p, err := box.Spawn(ctx, vendors.SpawnSpec{Name: "scenario", Command: []string{"sh", "-c", "echo out; echo err >&2; exit 4"}})
			if err != nil {
				return err
			}
			code, err := p.Wait(ctx)
			if err != nil || code != 4 {
				return fmt.Errorf("wait = %d, %v; want 4", code, err)
			}
			out, errOut, err := p.Logs(ctx)
			return want(err == nil && string(out) == "out\n" && string(errOut) == "err\n", "logs %q %q, %v", out, errOut, err)
		}},
		{"preview link", func() error {
			if _, err := box.Spawn(ctx, vendors.SpawnSpec{Name: "web", Command: []string{"node", "-e",
				`require('http').createServer((q, s) => s.end('preview ok ' + q.url)).listen(3000)`}}); err != nil {
				return err
			}
			ep, err := box.Endpoint(ctx, 3000)
			if err != nil {
				return err
			}
			body := ""
			polltest.Until(t, 30*time.Second, "the preview to answer", func() bool {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ep.URL+"/x", nil)
				for k, vs := range ep.Header {
					req.Header[k] = vs
				}
				resp, err := (&http.Client{Transport: ep.Transport}).Do(req)
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				body = string(b)
				return resp.StatusCode == http.StatusOK
			})
			return want(body == "preview ok /x", "preview answered %q", body)
		}},
		{"delete", func() error {
			if err := box.Destroy(ctx); err != nil {
				return err
			}
			_, err := box.Status(ctx)
			return want(errors.Is(err, vendors.ErrNotFound), "status after delete: %v", err)
		}},
	}
	passed := 0
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			start := time.Now()
			if err := s.run(); err != nil {
				t.Errorf("%s: %v", s.name, err)
				return
			}
			passed++
			t.Logf("%d ms", time.Since(start).Milliseconds())
		})
	}
	t.Logf("Go client scenario: %d of %d steps passed", passed, len(steps))
}

// want is nil when ok, else the error the format says.
func want(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}
