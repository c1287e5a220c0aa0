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

// opener is the server's vendors as boxstate.Apply opens them: opened
// once, closed by whoever made them (Options.Vendor's owner).
func (s *Server) opener(target string) (vendors.Vendor, func(), error) {
	v, err := s.vendor(target)
	return v, func() {}, err
}

// lifecycle answers a suspend or a resume (act) of a box through the call
// the CLI makes (boxstate.Apply): a live turn refuses a suspend
// (TypeBusy), a resume takes its model access from Options.Access.
func (s *Server) lifecycle(act boxstate.Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("box")
		if _, err := s.record(id); err != nil {
			writeError(w, err)
			return
		}
		if act == boxstate.Resume {
			s.forget(r.Context(), id) // its bearer no longer opens the box
		}
		state := func() (*boxstate.Store, error) { return s.o.Store, nil }
		got, err := boxstate.Apply(r.Context(), state, act, id, s.opener, s.o.Access, s.o.Logger)
		if err != nil {
			writeError(w, err)
			return
		}
		s.forget(r.Context(), got)
		writeJSON(w, http.StatusOK, Lifecycle{ID: got, State: act.String()})
	}
}
