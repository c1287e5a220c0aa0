package daytonaemu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// Faults are failures the emulator injects. The zero value injects none.
type Faults struct {
	// ErrorRate is the share (0 to 1) of control plane calls that fail
	// with one of Statuses.
	ErrorRate float64
	// Statuses are the statuses failing calls get, chosen at random.
	// Default 429 and 503. A 429 never takes effect: throttling refuses a
	// call before it runs.
	Statuses []int
	// LostRate is the share (0 to 1) of failed calls that change something
	// (not GET) which take effect before their 5xx answer, as when a
	// server fails after acting and the answer is lost.
	LostRate float64
	// RetryAfter is the wait a 429 asks for, in its
	// Retry-After-<throttler> header. Default 1s.
	RetryAfter time.Duration
	// CreateDelay delays every sandbox's start by this long.
	CreateDelay time.Duration
	// VanishAfter deletes every sandbox this long after it started, behind
	// its clients' backs (see Server.Vanish). Zero: never.
	VanishAfter time.Duration
}

func (f Faults) check() error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 || f.LostRate < 0 || f.LostRate > 1 {
		return fmt.Errorf("daytonaemu: error rate %v, lost rate %v: want 0 to 1", f.ErrorRate, f.LostRate)
	}
	for _, st := range f.Statuses {
		if st != http.StatusTooManyRequests && (st < 500 || st > 599) {
			return fmt.Errorf("daytonaemu: fail status %d: want 429 or 5xx", st)
		}
	}
	if f.RetryAfter < 0 || f.CreateDelay < 0 || f.VanishAfter < 0 {
		return errors.New("daytonaemu: negative fault duration")
	}
	return nil
}

// SetFaults replaces the faults injected from now on.
func (s *Server) SetFaults(f Faults) error {
	if err := f.check(); err != nil {
		return err
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	return nil
}

func (s *Server) currentFaults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

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

// faulty serves r with h, or fails it as the faults say.
func (s *Server) faulty(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	f := s.currentFaults()
	if f.ErrorRate == 0 || rand.Float64() >= f.ErrorRate {
		h(w, r)
		return
	}
	statuses := f.Statuses
	if len(statuses) == 0 {
		statuses = []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}
	}
	st := statuses[rand.IntN(len(statuses))]
	if st == http.StatusTooManyRequests {
		wait := f.RetryAfter
		if wait == 0 {
			wait = time.Second
		}
		w.Header().Set("Retry-After-"+throttler(r), strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		writeError(w, r, st, "ThrottlerException: Too Many Requests")
		return
	}
	if r.Method != http.MethodGet && rand.Float64() < f.LostRate {
		// The call takes effect; its answer is lost to a failing gateway.
		h(httptest.NewRecorder(), r)
	}
	writeError(w, r, st, http.StatusText(st))
}
