package daytona_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/daytona"
	"github.com/tangle-network/boxctl/vendors/daytona/daytonaemu"
	"github.com/tangle-network/boxctl/vendors/vendortest"
)

// hangingToolbox holds the first left toolbox GETs whose path ends with
// suffix until their request ends.
type hangingToolbox struct {
	suffix atomic.Pointer[string]
	left   atomic.Int32
	hung   atomic.Int32
}

func (h *hangingToolbox) RoundTrip(req *http.Request) (*http.Response, error) {
	s := h.suffix.Load()
	if s != nil && req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/toolbox/") &&
		strings.HasSuffix(req.URL.Path, *s) && h.left.Add(-1) >= 0 {
		h.hung.Add(1)
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(req)
}

func (h *hangingToolbox) hang(suffix string, n int32) {
	h.hung.Store(0)
	h.left.Store(n)
	h.suffix.Store(&suffix)
}

// A toolbox that takes a short call and never answers fails that attempt
// at the call bound: a state read is tried again, and a call that never
// gets an answer ends with a *vendorhttp.TimeoutError instead of holding
// its caller.
func TestVendor_ToolboxCallBound(t *testing.T) {
	t.Parallel()
	// The bound is every call's, not only the hung ones': on a loaded
	// machine an emulator's toolbox read that runs `docker exec` can take
	// a few seconds.
	const bound = 5 * time.Second
	emu, v := emulator(t, daytonaemu.Options{})
	box, err := v.Create(t.Context(), vendors.CreateSpec{Image: snapshotName, RunTag: vendortest.RunTag(t), Lifetime: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(t.Context())) })
	sp, err := box.Spawn(t.Context(), vendors.SpawnSpec{Name: "seven", Command: []string{"sh", "-c", "exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	// A second client of the box, through a toolbox that can hang.
	tb := &hangingToolbox{}
	bv, err := daytona.New(apiKey, daytona.WithAPIURL(emu.APIURL()), daytona.WithHTTPClient(&http.Client{Transport: tb}),
		daytona.WithCallTimeout(bound), daytona.WithRetry(3, 10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	bbox, err := bv.Connect(t.Context(), box.ID())
	if err != nil {
		t.Fatal(err)
	}
	p, err := bbox.Process(t.Context(), sp.ID())
	if err != nil {
		t.Fatal(err)
	}

	// The first two reads of the command's state never answer.
	tb.hang(commandPath(t, emu, box, p), 2)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if code, err := p.Wait(ctx); err != nil || code != 7 {
		t.Fatalf("Wait() = %d, %v; want 7", code, err)
	}
	if n := tb.hung.Load(); n != 2 {
		t.Errorf("%d reads hung, want 2", n)
	}

	// The session's state never answers.
	tb.hang("/process/session/"+p.ID(), 1<<30)
	start := time.Now()
	_, err = bbox.Process(ctx, p.ID())
	var te *vendorhttp.TimeoutError
	if !errors.As(err, &te) || te.After != bound {
		t.Fatalf("Process() = %v; want a *vendorhttp.TimeoutError after %v", err, bound)
	}
	if took, n := time.Since(start), tb.hung.Load(); n != 4 || took > 4*bound+15*time.Second {
		t.Errorf("Process() gave up after %d attempts in %v; want 4 (3 retries) within %v", n, took, 4*bound+15*time.Second)
	}
	tb.suffix.Store(nil)
}

// commandPath returns the toolbox path of p's command, as the emulator's
// toolbox lists it.
func commandPath(t *testing.T, emu *daytonaemu.Server, box vendors.Box, p vendors.Process) string {
	t.Helper()
	var s struct {
		Commands []struct {
			ID string `json:"id"`
		} `json:"commands"`
	}
	if err := json.Unmarshal(get(t, emu.URL()+"/toolbox/"+box.ID()+"/process/session/"+p.ID()), &s); err != nil || len(s.Commands) != 1 {
		t.Fatalf("session %s: %+v, %v", p.ID(), s, err)
	}
	return "/process/session/" + p.ID() + "/command/" + s.Commands[0].ID
}

// warmingToolbox answers the first left toolbox commands with the proxy's
// 502 for a sandbox it reaches no daemon of.
type warmingToolbox struct {
	left, refused atomic.Int32
}

func (w *warmingToolbox) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/process/execute") && w.left.Add(-1) >= 0 {
		w.refused.Add(1)
		body := `{"statusCode":502,"message":"sandbox is not running","code":"BAD_GATEWAY"}`
		return &http.Response{StatusCode: http.StatusBadGateway, Status: "502 Bad Gateway", Request: req,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
	return http.DefaultTransport.RoundTrip(req)
}

// A sandbox whose toolbox answers 502 for a moment after it started is
// resumed once the toolbox answers: its earlier processes are ended then.
func TestVendor_ResumeWhileToolboxWarms(t *testing.T) {
	t.Parallel()
	emu, v := emulator(t, daytonaemu.Options{})
	box, err := v.Create(t.Context(), vendors.CreateSpec{Image: snapshotName, RunTag: vendortest.RunTag(t),
		Lifetime: 5 * time.Minute, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = box.Destroy(context.WithoutCancel(t.Context())) })
	if _, err := v.Suspend(t.Context(), box.ID()); err != nil {
		t.Fatal(err)
	}
	tb := &warmingToolbox{}
	tb.left.Store(3)
	bv, err := daytona.New(apiKey, daytona.WithAPIURL(emu.APIURL()), daytona.WithHTTPClient(&http.Client{Transport: tb}),
		daytona.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := bv.Resume(t.Context(), box.ID())
	if err != nil {
		t.Fatalf("Resume() = %v; want it to wait out the toolbox's 502s", err)
	}
	if n := tb.refused.Load(); n != 3 {
		t.Errorf("%d commands refused, want 3", n)
	}
	if res, err := rb.Exec(t.Context(), vendors.ExecSpec{Command: []string{"echo", "up"}}); err != nil || string(res.Stdout) != "up\n" {
		t.Errorf("Exec after Resume = %+v, %v", res, err)
	}
}
