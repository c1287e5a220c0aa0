package inspector

import (
	"context"
	"net/http"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox"
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

// Replaced is the answer of POST /api/boxes/{box}/replace: the new box
// and how the lost box's sessions continue there.
type Replaced struct {
	ID          string                     `json:"id"`
	Replaces    string                     `json:"replaces"`
	Sessions    []sandbox.ContinuedSession `json:"sessions"`
	Interrupted []sandbox.InterruptedTurn  `json:"interrupted"`
}

// replace continues a lost box's sessions on a new box, as `boxctl turn
// --replace` does (boxstate.Store.Replace), with the model access of
// Options.Access. A box its vendor still has is refused (TypeNotLost).
func (s *Server) replace(w http.ResponseWriter, r *http.Request) {
	// One replacement at a time: a second request for the same box finds
	// it replaced (no longer in the state).
	s.replaceMu.Lock()
	defer s.replaceMu.Unlock()
	id := r.PathValue("box")
	rec, err := s.record(id)
	if err != nil {
		writeError(w, err)
		return
	}
	v, err := s.vendor(rec.Target)
	if err != nil {
		writeError(w, err)
		return
	}
	access, err := s.o.Access(r.Context(), v, rec)
	if err != nil {
		writeError(w, err)
		return
	}
	next, env, rep, err := s.o.Store.Replace(r.Context(), v, rec, access)
	if err != nil {
		writeError(w, err)
		return
	}
	_ = env.Close(context.WithoutCancel(r.Context()))
	s.forget(r.Context(), id)
	out := Replaced{ID: next.ID, Replaces: rep.From, Sessions: rep.Sessions, Interrupted: rep.Interrupted}
	if out.Sessions == nil {
		out.Sessions = []sandbox.ContinuedSession{}
	}
	if out.Interrupted == nil {
		out.Interrupted = []sandbox.InterruptedTurn{}
	}
	writeJSON(w, http.StatusOK, out)
}
