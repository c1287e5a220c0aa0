package inspector

import (
	"net/http"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/vendors"
)

// Lifecycle is the answer of POST /api/boxes/{box}/suspend and /resume.
type Lifecycle struct {
	ID string `json:"id"`
	// State is "suspended" or "resumed".
	State string `json:"state"`
}

// opener is the server's vendors as boxstate.Verb opens them: opened
// once, closed by whoever made them (Options.Vendor's owner).
func (s *Server) opener(target string) (vendors.Vendor, func(), error) {
	v, err := s.vendor(target)
	return v, func() {}, err
}

// lifecycle answers `boxctl suspend` or `boxctl resume` (verb) of a box
// through the call the CLI makes (boxstate.Verb): a live turn refuses a
// suspend (TypeBusy), a resume takes its Router from Options.Getenv.
func (s *Server) lifecycle(verb, done string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("box")
		if _, err := s.record(id); err != nil {
			writeError(w, err)
			return
		}
		if verb == "resume" {
			s.forget(r.Context(), id) // its bearer no longer opens the box
		}
		state := func() (*boxstate.Store, error) { return s.o.Store, nil }
		got, err := boxstate.Verb(r.Context(), state, verb, id, s.opener, s.o.Getenv, s.o.Logger)
		if err != nil {
			writeError(w, err)
			return
		}
		s.forget(r.Context(), got)
		writeJSON(w, http.StatusOK, Lifecycle{ID: got, State: done})
	}
}
