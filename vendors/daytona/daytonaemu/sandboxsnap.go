package daytonaemu

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
)

// Sandbox snapshots: POST /sandbox/{id}/snapshot (CreateSandboxSnapshot
// {name, includeMemory}) takes a started or stopped container sandbox's
// filesystem into a new snapshot of that name, as a container runner does
// (commit, then the snapshot is active). The call answers at once with the
// sandbox in state snapshotting (a state change in progress: stop, start,
// delete and a second snapshot are 409 meanwhile); it goes back to the
// state it had once the snapshot is active, or when the commit failed (the
// snapshot is not made then). Sandboxes created from the snapshot start a
// container of the committed image. includeMemory is for Windows
// sandboxes only (400), as there. POST /sandbox/{id}/fork answers 422, as
// Daytona does for a container sandbox (its fork is for VM sandboxes).
// Close removes the committed images.

// stateSnapshotting is a sandbox whose filesystem is being taken into a
// snapshot.
const stateSnapshotting = "snapshotting"

// sandboxSnapshotRepo is the repository of the committed images.
const sandboxSnapshotRepo = "daytonaemu-snapshot"

// snapshotSandbox is POST /sandbox/{id}/snapshot.
func (s *Server) snapshotSandbox(w http.ResponseWriter, r *http.Request, idOrName string) {
	var req struct {
		Name          string `json:"name"`
		IncludeMemory bool   `json:"includeMemory"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, r, http.StatusBadRequest, "Invalid JSON body: "+err.Error())
		return
	}
	if req.Name == "" {
		writeError(w, r, http.StatusBadRequest, "name must be a string")
		return
	}
	s.mu.Lock()
	sb := s.find(idOrName)
	switch {
	case sb == nil:
		s.mu.Unlock()
		writeError(w, r, http.StatusNotFound, "Sandbox with ID or name "+idOrName+" not found")
		return
	case sb.State != stateStarted && sb.State != stateStopped:
		s.mu.Unlock()
		writeError(w, r, http.StatusBadRequest, "Sandbox must be in started or stopped state to create a snapshot")
		return
	case sb.pending:
		s.mu.Unlock()
		writeError(w, r, http.StatusConflict, "Sandbox state change in progress")
		return
	case req.IncludeMemory:
		s.mu.Unlock()
		writeError(w, r, http.StatusBadRequest, "includeMemory is only supported for Windows sandboxes")
		return
	case sb.box == nil:
		s.mu.Unlock()
		writeError(w, r, http.StatusBadRequest, "Sandbox has no container to snapshot")
		return
	case s.findSnapshot(req.Name) != nil:
		s.mu.Unlock()
		writeError(w, r, http.StatusConflict, "Snapshot with name "+req.Name+" already exists")
		return
	}
	prev, box, frozen := sb.State, sb.box, sb.frozen
	sb.State, sb.pending, sb.UpdatedAt = stateSnapshotting, true, time.Now().UTC()
	s.notify(sb, prev)
	out := s.dto(sb)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if prev == stateStopped && frozen != nil {
			<-frozen // the stop's freeze is done: the commit finds it paused
		}
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
		defer cancel()
		ref := sandboxSnapshotRepo + ":" + newID(8)
		begin := time.Now()
		// Pause: a started sandbox is frozen for the commit (a stopped one
		// already is) and runs on after it.
		_, err := s.engine.ContainerCommit(ctx, box.ID(), container.CommitOptions{Reference: ref, Pause: true,
			Comment: "snapshot " + req.Name + " of sandbox " + sb.ID})
		var size int64
		if err == nil {
			if img, ierr := s.engine.ImageInspect(ctx, ref); ierr == nil {
				size = img.Size
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.opts.Log.Warn("daytona emulator: snapshot a sandbox", "id", sb.ID, "err", err)
		} else if s.findSnapshot(req.Name) == nil {
			now, gb := time.Now().UTC(), float64(size)/(1<<30)
			snap := &snapshot{ID: newUUID(), OrgID: orgID, Name: req.Name, ImageName: ref, State: snapshotActive, Size: &gb,
				CPU: sb.CPU, Mem: sb.Memory, Disk: sb.Disk, CreatedAt: now, UpdatedAt: now, Ref: ref, image: ref}
			s.snapshots[snap.ID] = snap
			s.committed = append(s.committed, ref)
			s.opts.Log.Info("daytona sandbox snapshotted", "id", sb.ID, "snapshot", req.Name, "took", time.Since(begin))
		}
		if sb.State == stateSnapshotting {
			sb.State, sb.pending, sb.UpdatedAt = prev, false, time.Now().UTC()
			s.notify(sb, stateSnapshotting)
		}
	}()
	writeJSON(w, http.StatusOK, out)
}

// removeCommitted removes the images sandbox snapshots committed.
func (s *Server) removeCommitted() error {
	s.mu.Lock()
	imgs := s.committed
	s.committed = nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, img := range imgs {
		if _, err := s.engine.ImageRemove(ctx, img, image.RemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
