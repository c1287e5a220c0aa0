package daytona_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/tangle-network/boxctl/internal/boxbridgetest"
	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/polltest"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/reaper"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

const apiKey = "dtn_0123456789abcdef"

// snapshotName is the snapshot of the box image every emulator starts
// with.
const snapshotName = "boxctl-box"

func TestMain(m *testing.M) { boxbridgetest.Main(m) }

// emulator starts an emulator whose sandboxes run the box image on the
// test bed's engine, with opts' faults, and a client of it.
func emulator(t *testing.T, opts daytonaemu.Options, clientOpts ...daytona.Option) (*daytonaemu.Server, *daytona.Vendor) {
	t.Helper()
	env := testbed.Require(t)
	img := boxtest.Image(t, boxtest.Options{})
	opts.APIKey, opts.DockerHost, opts.Network, opts.Registry = apiKey, env.DockerHost, "boxctl-test", env.Registry
	opts.Snapshots = map[string]string{snapshotName: img}
	emu, err := daytonaemu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	v, err := daytona.New(apiKey, append([]daytona.Option{daytona.WithAPIURL(emu.APIURL()),
		daytona.WithPollInterval(100 * time.Millisecond), daytona.WithRetry(8, 10*time.Millisecond, 200*time.Millisecond)},
		clientOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return emu, v
}

func TestVendor_Suite(t *testing.T) {
	emu, v := emulator(t, daytonaemu.Options{})
	vendortest.Run(t, vendortest.Config{Vendor: v, Image: snapshotName, Describe: describe(emu)})
}

// describe returns everything the emulator shows of a box: the control
// plane's sandbox, the toolbox's sessions and commands, and the engine's
// inspect data of its container and execs.
func describe(emu *daytonaemu.Server) func(t testing.TB, b vendors.Box, _ vendors.Process) []byte {
	return func(t testing.TB, b vendors.Box, _ vendors.Process) []byte {
		out := get(t, emu.APIURL()+"/sandbox/"+b.ID())
		out = append(out, get(t, emu.URL()+"/toolbox/"+b.ID()+"/process/session")...)
		return append(out, []byte(boxtest.Inspect(t, containerOf(t, b.ID())))...)
	}
}

func get(t testing.TB, url string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s %v", url, resp.StatusCode, b, err)
	}
	return b
}

// containerOf returns the id of the emulator's container of a sandbox.
func containerOf(t testing.TB, sandboxID string) string {
	t.Helper()
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", "io.daytona.emulator.sandbox="+sandboxID))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers of sandbox %s: %d, %v", sandboxID, len(cs), err)
	}
	return cs[0].ID
}

// sandboxJSON is the control plane's description of a sandbox.
func sandboxJSON(t testing.TB, emu *daytonaemu.Server, id string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(get(t, emu.APIURL()+"/sandbox/"+id), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestVendor_CreatesUnderFaults makes 20 boxes at once while 30% of the
// control plane's calls fail with 429 or 503 (half of the failed changing
// calls having taken effect): every create succeeds, no sandbox is made
// twice, and afterwards gc finds nothing left of the run.
func TestVendor_CreatesUnderFaults(t *testing.T) {
	t.Parallel()
	emu, v := emulator(t, daytonaemu.Options{Faults: daytonaemu.Faults{ErrorRate: 0.3, LostRate: 0.5,
		Statuses: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}}}, daytona.WithCreateAttempts(8))
	tag := vendortest.RunTag(t)
	const n = 20
	boxes := make([]vendors.Box, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			boxes[i], errs[i] = v.Create(t.Context(), vendors.CreateSpec{Image: snapshotName, RunTag: tag, Lifetime: 5 * time.Minute})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		_ = emu.SetFaults(daytonaemu.Faults{})
		for _, b := range boxes {
			if b != nil {
				_ = b.Destroy(context.WithoutCancel(t.Context()))
			}
		}
	})
	ids := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create #%d: %v", i, err)
			continue
		}
		ids[boxes[i].ID()] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct boxes from %d creates", len(ids), n)
	}
	list, err := v.List(t.Context(), map[string]string{boxmeta.LabelRunTag: tag})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list {
		if !ids[b.ID] {
			t.Errorf("sandbox %s of the run is none of the boxes Create returned: a duplicate", b.ID)
		}
	}
	if len(list) != n {
		t.Errorf("List(run tag) = %d sandboxes, want %d", len(list), n)
	}
	var dwg sync.WaitGroup
	for i, b := range boxes {
		dwg.Go(func() {
			if err := b.Destroy(t.Context()); err != nil {
				t.Errorf("Destroy #%d: %v", i, err)
			}
		})
	}
	dwg.Wait()
	// Past every deadline, gc would reap whatever of the run is left.
	later := time.Now().Add(time.Hour)
	reaped, err := reaper.Reap(t.Context(), v, reaper.Options{Filter: reaper.RunTagFilter(tag),
		DryRun: true, Now: func() time.Time { return later }})
	if err != nil || len(reaped) != 0 {
		t.Errorf("gc after the destroys = %d boxes (%+v), %v; want none", len(reaped), reaped, err)
	}
}

// TestVendor_VanishedBoxStream cuts a box's endpoint stream by deleting
// the box behind the client's back: the read fails with the typed gone
// error within 5s, and every call on the box then fails as not found.
func TestVendor_VanishedBoxStream(t *testing.T) {
	t.Parallel()
	emu, v := emulator(t, daytonaemu.Options{})
	box, err := v.Create(t.Context(), vendors.CreateSpec{Image: snapshotName, RunTag: vendortest.RunTag(t), Lifetime: 5 * time.Minute, Ports: []int{8080}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(t.Context())) })
	if _, err := box.Spawn(t.Context(), vendors.SpawnSpec{Command: []string{"node", "-e",
		`require("http").createServer((q, s) => { s.writeHead(200); s.write("tick\n"); setInterval(() => s.write("tick\n"), 100) }).listen(8080, "0.0.0.0")`}}); err != nil {
		t.Fatal(err)
	}
	ep, err := box.Endpoint(t.Context(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	polltest.Until(t, 30*time.Second, "the box's stream to answer", func() bool {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ep.URL+"/stream", nil)
		resp, err = ep.Client().Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	defer resp.Body.Close()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "tick\n" {
		t.Fatalf("stream = %q, %v", buf, err)
	}
	start := time.Now()
	if err := emu.Vanish(box.ID()); err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if took := time.Since(start); !errors.Is(err, vendors.ErrGone) || took > 5*time.Second {
		t.Fatalf("read of the vanished box's stream = %v after %v, want vendors.ErrGone within 5s", err, took)
	}
	if _, err := box.Exec(t.Context(), vendors.ExecSpec{Command: []string{"true"}}); !errors.Is(err, vendors.ErrNotFound) {
		t.Errorf("Exec in the vanished box = %v, want vendors.ErrNotFound", err)
	}
	if _, err := ep.Client().Get(ep.URL + "/again"); !errors.Is(err, vendors.ErrGone) {
		t.Errorf("a new request to the vanished box = %v, want vendors.ErrGone", err)
	}
}
