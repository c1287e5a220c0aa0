package sandbox_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/tangle-network/boxctl/internal/boxtest"
	"github.com/tangle-network/boxctl/internal/dockerclient"
	"github.com/tangle-network/boxctl/internal/testbed"
	"github.com/tangle-network/boxctl/provider"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// The sandbox flow also runs on Daytona's emulator: each test gets an
// emulator of its own whose sandboxes are the box image on the test bed's
// engine, on the boxes' network (where the model endpoint listens).

const daytonaKey = "dtn_sandbox_test_key"

func init() { extraTargets = append(extraTargets, daytonaTarget) }

func daytonaTarget(t testing.TB, f *fixture) target {
	emu, v := daytonaEmulator(t, f, daytonaemu.Options{})
	return target{name: "daytona", vendor: v, image: "box", inspect: func(t testing.TB, boxID string) string {
		return daytonaDescribe(t, emu, boxID)
	}}
}

func daytonaEmulator(t testing.TB, f *fixture, opts daytonaemu.Options) (*daytonaemu.Server, *daytona.Vendor) {
	t.Helper()
	env := testbed.Require(t)
	opts.APIKey, opts.DockerHost, opts.Network = daytonaKey, env.DockerHost, testNetwork
	opts.Snapshots = map[string]string{"box": f.image}
	emu, err := daytonaemu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	v, err := daytona.New(daytonaKey, daytona.WithAPIURL(emu.APIURL()), daytona.WithPollInterval(100*time.Millisecond),
		daytona.WithRetry(8, 10*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return emu, v
}

// daytonaDescribe returns what the emulator shows of a box: the control
// plane's sandbox, the toolbox's sessions (their commands' text) and the
// engine's inspect data of the sandbox's container and its execs.
func daytonaDescribe(t testing.TB, emu *daytonaemu.Server, id string) string {
	t.Helper()
	get := func(url string) string {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+daytonaKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
		}
		return string(b)
	}
	cli, err := dockerclient.New(testbed.Require(t).DockerHost)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", "io.daytona.emulator.sandbox="+id))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("containers of sandbox %s: %d, %v", id, len(cs), err)
	}
	return get(emu.APIURL()+"/sandbox/"+id) + get(emu.URL()+"/toolbox/"+id+"/process/session") + boxtest.Inspect(t, cs[0].ID)
}

// TestProvider_DaytonaBoxVanishesMidTurn deletes a box behind the
// provider's back while a turn streams: the turn ends with the typed gone
// error within 5s.
func TestProvider_DaytonaBoxVanishesMidTurn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	emu, v := daytonaEmulator(t, f, daytonaemu.Options{})
	p := f.on(t, target{name: "daytona", vendor: v, image: "box"}, nil)
	env, err := p.Create(t.Context(), sandbox.CreateRequest{Profile: claude})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = env.Destroy(context.WithoutCancel(t.Context())) })

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	events, errc := make(chan provider.Event, 64), make(chan error, 1)
	go func() {
		_, evs, err := turn(ctx, env, provider.Turn{Prompt: promptStall})
		for _, ev := range evs {
			events <- ev
		}
		errc <- err
	}()
	vendortest.Poll(t, time.Minute, "the stalled turn to reach the model", func() bool { return f.sawPrompt(promptStall) })
	start := time.Now()
	if err := emu.Vanish(env.Box().ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		took := time.Since(start)
		if !errors.Is(err, vendors.ErrGone) {
			t.Fatalf("turn after the box vanished = %v, want vendors.ErrGone", err)
		}
		if took > 5*time.Second {
			t.Errorf("the gone error came %v after the box vanished, want within 5s", took)
		}
		t.Logf("turn ended %v after the box vanished: %v", took.Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the turn still runs 30s after its box vanished")
	}
}
