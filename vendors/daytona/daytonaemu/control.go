package daytonaemu

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Control plane routes of a sandbox's lifecycle beyond create and delete:
// stop, start, archive, last activity. A stopped sandbox keeps its
// container frozen (the engine's pause), so start resumes it with its
// files and its processes; archive keeps it so too.

// stateArchived is a stopped sandbox whose disk went to cold storage.
const stateArchived = "archived"

// stopRoute is POST /sandbox/{id}/stop.
func (s *Server) stopRoute(w http.ResponseWriter, r *http.Request, idOrName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.find(idOrName)
	switch {
	case sb == nil:
		writeError(w, r, http.StatusNotFound, "Sandbox with ID or name "+idOrName+" not found")
		return
	case sb.pending:
		writeError(w, r, http.StatusConflict, "Sandbox state change in progress")
		return
	case sb.State == stateStopped || sb.State == stateArchived:
		writeJSON(w, http.StatusOK, s.dto(sb))
		return
	case sb.State != stateStarted:
		writeError(w, r, http.StatusBadRequest, "Sandbox is not started")
		return
	}
	s.stop(sb, "asked to")
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// startRoute is POST /sandbox/{id}/start: a stopped or archived sandbox's
// container is resumed.
func (s *Server) startRoute(w http.ResponseWriter, r *http.Request, idOrName string) {
	s.mu.Lock()
	sb := s.find(idOrName)
	switch {
	case sb == nil:
		s.mu.Unlock()
		writeError(w, r, http.StatusNotFound, "Sandbox with ID or name "+idOrName+" not found")
		return
	case sb.State == stateStarted:
		out := s.dto(sb)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
		return
	case sb.pending:
		s.mu.Unlock()
		writeError(w, r, http.StatusConflict, "Sandbox state change in progress")
		return
	case (sb.State != stateStopped && sb.State != stateArchived) || sb.box == nil:
		s.mu.Unlock()
		writeError(w, r, http.StatusBadRequest, "Sandbox cannot be started: it is "+sb.State+" and its container is gone")
		return
	}
	old := sb.State
	sb.State, sb.DesiredState, sb.pending, sb.UpdatedAt = "starting", stateStarted, true, time.Now().UTC()
	s.notify(sb, old)
	frozen := sb.frozen
	s.mu.Unlock()
	if frozen != nil {
		<-frozen
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	err := s.boxes.Thaw(ctx, sb.ID)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	sb.pending, sb.UpdatedAt = false, time.Now().UTC()
	if err != nil {
		sb.State, sb.ErrorReason = stateError, "Failed to start sandbox: "+err.Error()
		s.notify(sb, "starting")
		writeJSON(w, http.StatusOK, s.dto(sb))
		return
	}
	sb.ctx, sb.cancel = context.WithCancel(s.ctx)
	sb.State, sb.LastActivity = stateStarted, time.Now().UTC()
	s.notify(sb, "starting")
	writeJSON(w, http.StatusOK, s.dto(sb))
}

// archiveRoute is POST /sandbox/{id}/archive: only a stopped sandbox.
func (s *Server) archiveRoute(w http.ResponseWriter, r *http.Request, idOrName string) {
	s.withSandbox(w, r, idOrName, func(sb *sandbox) {
		switch sb.State {
		case stateArchived:
		case stateStopped:
			sb.State, sb.DesiredState, sb.UpdatedAt = stateArchived, stateArchived, time.Now().UTC()
			s.notify(sb, stateStopped)
		default:
			writeError(w, r, http.StatusBadRequest, "Sandbox is not stopped")
			return
		}
		writeJSON(w, http.StatusOK, s.dto(sb))
	})
}

// lastActivity is POST /sandbox/{id}/last-activity: the auto-stop
// interval counts from now.
func (s *Server) lastActivity(w http.ResponseWriter, r *http.Request, idOrName string) {
	s.withSandbox(w, r, idOrName, func(sb *sandbox) {
		sb.LastActivity = time.Now().UTC()
		w.WriteHeader(http.StatusCreated)
	})
}

// listSnapshots is GET /snapshots: PaginatedSnapshots.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, limit := 1, 100
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		page = n
	}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		limit = n
	}
	s.mu.Lock()
	var all []snapshot
	for _, snap := range s.snapshots {
		if name := q.Get("name"); name == "" || snap.Name == name {
			all = append(all, *snap)
		}
	}
	s.mu.Unlock()
	sortSnapshots(all)
	total := len(all)
	from := min((page-1)*limit, total)
	to := min(from+limit, total)
	writeJSON(w, http.StatusOK, map[string]any{"items": all[from:to], "total": total, "page": page,
		"totalPages": (total + limit - 1) / limit})
}

// sortSnapshots orders snapshots newest first.
func sortSnapshots(l []snapshot) {
	slices.SortFunc(l, func(a, b snapshot) int { return b.CreatedAt.Compare(a.CreatedAt) })
}
