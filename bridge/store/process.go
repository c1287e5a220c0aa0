package store

import "context"

// SetProcessMarker records the process group of a run's harness and the
// environment marker its processes carry, for a run served by a process
// that an earlier run started (a retained session's long-lived harness):
// recovery then finds that process by the marker it was started with.
func (s *Store) SetProcessMarker(ctx context.Context, id string, pgid int, marker string) error {
	return s.update(ctx, "set process", id, `UPDATE runs SET pgid = ?, marker = ? WHERE id = ?`, pgid, marker, id)
}
