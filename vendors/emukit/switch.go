package emukit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/tangle-network/boxctl/internal/vendorhttp"
)

// SwitchPath is the path of an emulator's fault switch under its control
// plane's URL: GET answers the faults and their counts (SwitchState), PUT
// with a Faults replaces the faults. The switch takes the control plane's
// key and is never failed by the faults it sets.
const SwitchPath = "/emulator/faults"

// SwitchState is what the fault switch answers: the faults injected now
// and the counts of those injected so far.
type SwitchState struct {
	Faults Faults `json:"faults"`
	Counts Counts `json:"counts"`
}

// ServeSwitch serves the fault switch (SwitchPath) of the injector.
func (in *Injector) ServeSwitch(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut:
		var f Faults
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&f); err != nil {
			http.Error(w, "decode the faults: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := in.Set(f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(SwitchState{Faults: in.Faults(), Counts: in.Counts()})
}

// Switch is the fault switch of an emulator served elsewhere (boxctl
// emulate), asked over HTTP. It is safe for concurrent use.
type Switch struct {
	c *vendorhttp.Client
}

// NewSwitch returns the switch of the emulator whose control plane is at
// apiURL, sending header with the control plane's key (value) on every
// call; hc nil means the default client.
func NewSwitch(apiURL, header, value string, hc *http.Client) (*Switch, error) {
	c, err := vendorhttp.New(vendorhttp.Config{Vendor: "emulator", BaseURL: apiURL, Header: http.Header{header: {value}}},
		vendorhttp.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &Switch{c: c}, nil
}

// SetFaults replaces the emulator's faults from now on.
func (s *Switch) SetFaults(ctx context.Context, f Faults) error {
	if _, err := s.c.Do(ctx, vendorhttp.Call{Method: http.MethodPut, Path: SwitchPath, Body: f}); err != nil {
		return fmt.Errorf("set the emulator's faults: %w", err)
	}
	return nil
}

// FaultCounts returns the faults the emulator injected so far.
func (s *Switch) FaultCounts(ctx context.Context) (Counts, error) {
	var st SwitchState
	if _, err := s.c.Do(ctx, vendorhttp.Call{Method: http.MethodGet, Path: SwitchPath, Out: &st}); err != nil {
		return Counts{}, fmt.Errorf("the emulator's fault counts: %w", err)
	}
	return st.Counts, nil
}
