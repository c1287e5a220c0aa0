package emukit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSwitch sets an injector's faults over HTTP and reads back the
// counts of the calls it then failed; a bad fault is refused, a wrong key
// is the control plane's to refuse.
func TestSwitch(t *testing.T) {
	in, err := NewInjector(InjectorOptions{
		Throttled: func(w http.ResponseWriter, _ *http.Request, _ time.Duration) {
			w.WriteHeader(http.StatusTooManyRequests)
		},
		Failed: func(w http.ResponseWriter, _ *http.Request, status int) { w.WriteHeader(status) }})
	if err != nil {
		t.Fatal(err)
	}
	const key = "the-key"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("X-Key") != key:
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path == "/api"+SwitchPath:
			in.ServeSwitch(w, r)
		default:
			in.Serve(w, r, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		}
	}))
	defer srv.Close()
	sw, err := NewSwitch(srv.URL+"/api", "X-Key", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := sw.SetFaults(ctx, Faults{ErrorRate: 1, Statuses: []int{502}}); err != nil {
		t.Fatal(err)
	}
	if got := in.Faults(); got.ErrorRate != 1 || len(got.Statuses) != 1 || got.Statuses[0] != 502 {
		t.Errorf("faults after SetFaults: %+v", got)
	}
	for range 3 {
		resp, err := http.Get(srv.URL + "/api/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The switch itself is never failed.
	if n, err := sw.FaultCounts(ctx); err != nil || n != (Counts{}) {
		t.Errorf("FaultCounts() = %+v, %v; want none (the calls had no key)", n, err)
	}
	for range 3 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/x", nil)
		req.Header.Set("X-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n, err := sw.FaultCounts(ctx); err != nil || n != (Counts{Failed: 3}) {
		t.Errorf("FaultCounts() = %+v, %v; want 3 failed", n, err)
	}
	if err := sw.SetFaults(ctx, Faults{ErrorRate: 2}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("SetFaults(rate 2) = %v, want a 400", err)
	}
	bad, err := NewSwitch(srv.URL+"/api", "X-Key", "wrong", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.FaultCounts(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("FaultCounts with a wrong key = %v, want a 401", err)
	}
}
