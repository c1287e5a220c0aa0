package daytonaemu

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/vendors/emukit"
)

// Faults are failures the emulator injects, those of every emulator. The
// zero value injects none.
type Faults = emukit.Faults

// SetFaults replaces the faults injected from now on. It refuses faults
// out of range.
func (s *Server) SetFaults(f Faults) error {
	if err := s.faults.Set(f); err != nil {
		return fmt.Errorf("daytonaemu: %w", err)
	}
	return nil
}

// FaultCounts returns the faults injected so far.
func (s *Server) FaultCounts() emukit.Counts { return s.faults.Counts() }

// HostAddress returns this machine's address as the sandboxes reach it
// (the gateway of their Docker network), for a client's
// daytona.WithHostAddress.
func (s *Server) HostAddress(ctx context.Context) (string, error) { return s.boxes.HostAddress(ctx) }

// throttler names the rate limit a control plane route falls under, as
// the control plane's throttler scopes do.
func throttler(r *http.Request) string {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/sandbox":
		return "sandbox-create"
	case r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/sandbox/"):
		return "sandbox-lifecycle"
	}
	return "authenticated"
}

// throttled answers a call refused by the faults with 429, its wait in
// the Retry-After-<throttler> header.
func throttled(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After-"+throttler(r), strconv.Itoa(emukit.Seconds(wait)))
	writeError(w, r, http.StatusTooManyRequests, "ThrottlerException: Too Many Requests")
}

// failed answers a call failed by the faults with a 5xx.
func failed(w http.ResponseWriter, r *http.Request, status int) {
	writeError(w, r, status, http.StatusText(status))
}
