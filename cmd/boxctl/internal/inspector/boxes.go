package inspector

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
	"github.com/tangle-network/boxctl/provider/sandbox"
	"github.com/tangle-network/boxctl/vendors"
	"github.com/tangle-network/boxctl/vendors/boxmeta"
)

// Box is one box of the listing: the vendor's view joined with the
// state's record (boxstate.Row, whose fields it carries), its vendor, and
// the run of the turn this server streams in it.
type Box struct {
	boxstate.Row
	Target  string `json:"target"`
	LiveRun string `json:"liveRun,omitempty"`
	// Pool is the warm pool the box was claimed from (its
	// boxmeta.LabelPool), if any.
	Pool string `json:"pool,omitempty"`
	// Suspended reports that the state's record holds a suspended box's
	// reference (no bearer: `boxctl resume` makes a new one).
	Suspended bool `json:"suspended,omitempty"`
}

// TargetError is a vendor whose boxes could not be listed.
type TargetError struct {
	Target  string `json:"target"`
	Message string `json:"message"`
}

// Boxes is the answer of GET /api/boxes.
type Boxes struct {
	Boxes  []Box         `json:"boxes"`
	Errors []TargetError `json:"errors"`
}

// vendor returns the vendor of target, opened once.
func (s *Server) vendor(target string) (vendors.Vendor, error) {
	s.mu.Lock()
	v, ok := s.vendors[target]
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if ok {
		return v, nil
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	v, ok = s.vendors[target]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := s.o.Vendor(target)
	if err != nil {
		return nil, fmt.Errorf("open vendor %s: %w", target, err)
	}
	s.mu.Lock()
	s.vendors[target] = v
	s.mu.Unlock()
	return v, nil
}

// record returns the state's record of box id (its whole id).
func (s *Server) record(id string) (*boxstate.Record, error) {
	st, err := s.o.Store.Load()
	if err != nil {
		return nil, err
	}
	if rec := st.Find(id); rec != nil && !rec.Pending() {
		return rec, nil
	}
	return nil, &boxstate.NoBoxError{Arg: id}
}

// env returns the environment of box id, connected once from its record.
func (s *Server) env(ctx context.Context, id string) (*sandbox.Environment, *boxstate.Record, error) {
	rec, err := s.record(id)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	env := s.envs[id]
	s.mu.Unlock()
	if env != nil {
		return env, rec, nil
	}
	v, err := s.vendor(rec.Target)
	if err != nil {
		return nil, nil, err
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	env = s.envs[id]
	s.mu.Unlock()
	if env != nil {
		return env, rec, nil
	}
	co := boxstate.ConnectOptions{Interactive: true}
	if rec.Upstream != "" {
		// Through the box's broker its turns are recorded in the replica,
		// which a replacement rebuilds the sessions from.
		if acc, err := s.o.Access(ctx, v, rec); err == nil {
			co.Access = &acc
		} else {
			s.o.Logger.Warn("the box's broker: its turns are not recorded in the replica", "box", boxstate.ShortID(id), "err", err)
		}
	}
	env, err = s.o.Store.Connect(ctx, v, rec, co)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = env.Close(context.WithoutCancel(ctx))
		return nil, nil, errClosed
	}
	s.envs[id] = env
	return env, rec, nil
}

// forget drops and closes the environment of box id.
func (s *Server) forget(ctx context.Context, id string) {
	s.mu.Lock()
	env := s.envs[id]
	delete(s.envs, id)
	s.mu.Unlock()
	if env != nil {
		_ = env.Close(context.WithoutCancel(ctx))
	}
}

// boxes lists the state's boxes on each vendor its records name.
func (s *Server) boxes(ctx context.Context) (Boxes, error) {
	st, err := s.o.Store.Load()
	if err != nil {
		return Boxes{}, err
	}
	var targets []string
	for _, rec := range st.Boxes {
		if !rec.Pending() && !slices.Contains(targets, rec.Target) {
			targets = append(targets, rec.Target)
		}
	}
	slices.Sort(targets)
	out := Boxes{Boxes: []Box{}, Errors: []TargetError{}}
	for _, target := range targets {
		v, err := s.vendor(target)
		var infos []vendors.Info
		if err == nil {
			infos, err = v.List(ctx, nil)
		}
		if err != nil {
			out.Errors = append(out.Errors, TargetError{Target: target, Message: err.Error()})
			continue
		}
		pools := map[string]string{}
		for _, info := range infos {
			pools[info.ID] = info.Labels[boxmeta.LabelPool]
		}
		for _, row := range st.Rows(target, s.o.Store.Owner(), infos) {
			if !row.InState {
				continue
			}
			b := Box{Row: row, Target: target, LiveRun: s.liveRun(row.ID), Pool: pools[row.ID]}
			if rec := st.Find(row.ID); rec != nil && rec.Reference != nil && rec.Reference.Bearer == "" && row.State != boxstate.StateGone && row.State != boxstate.StateLost {
				b.Suspended = true
			}
			out.Boxes = append(out.Boxes, b)
		}
	}
	slices.SortStableFunc(out.Boxes, func(a, b Box) int { return cmp.Compare(b.Created.UnixNano(), a.Created.UnixNano()) })
	return out, nil
}

func (s *Server) listBoxes(w http.ResponseWriter, r *http.Request) {
	b, err := s.boxes(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) getBox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("box")
	if _, err := s.record(id); err != nil {
		writeError(w, err)
		return
	}
	b, err := s.boxes(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	for _, box := range b.Boxes {
		if box.ID == id {
			writeJSON(w, http.StatusOK, box)
			return
		}
	}
	for _, te := range b.Errors {
		writeError(w, errorf(http.StatusBadGateway, TypeUpstream, te.Message))
		return
	}
	writeError(w, &boxstate.NoBoxError{Arg: id})
}

// maxLog is how much of each of the bridge's streams the log view shows:
// its end.
const maxLog = 256 << 10

// Log is the answer of GET /api/boxes/{box}/logs.
type Log struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated,omitempty"`
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	env, _, err := s.env(r.Context(), r.PathValue("box"))
	if err != nil {
		writeError(w, err)
		return
	}
	out, errOut, err := env.BridgeLog(r.Context())
	if err != nil {
		writeError(w, fmt.Errorf("bridge output: %w", err))
		return
	}
	var l Log
	l.Stdout, l.Truncated = logTail(out)
	var t bool
	l.Stderr, t = logTail(errOut)
	l.Truncated = l.Truncated || t
	writeJSON(w, http.StatusOK, l)
}

func logTail(b []byte) (string, bool) {
	if len(b) > maxLog {
		return string(b[len(b)-maxLog:]), true
	}
	return string(b), false
}

// boxEvents returns the lifecycle events of box id (by id, or by run
// tag for those before it had one), oldest first.
func (s *Server) boxEvents(ctx context.Context, id, runTag string) ([]sandbox.Event, error) {
	evs := []sandbox.Event{}
	err := s.o.Store.Events().Read(ctx, false, func(ev sandbox.Event) error {
		if ev.BoxID == id || (ev.BoxID == "" && runTag != "" && ev.RunTag == runTag) {
			evs = append(evs, ev)
		}
		return nil
	})
	return evs, err
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("box")
	runTag := ""
	if rec, err := s.record(id); err == nil {
		runTag = rec.RunTag
	}
	evs, err := s.boxEvents(r.Context(), id, runTag)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, evs)
}

// Destroyed is the answer of POST /api/boxes/{box}/destroy.
type Destroyed struct {
	ID string `json:"id"`
	boxstate.Removed
}

func (s *Server) destroy(w http.ResponseWriter, r *http.Request) {
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
	s.forget(r.Context(), id)
	removed, err := s.o.Store.Remove(r.Context(), v, id, rec)
	s.endTurns(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Destroyed{ID: id, Removed: removed})
}

// stamp is a time the page shows, or nothing for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
