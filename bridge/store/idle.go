package store

import (
	"context"
	"fmt"
	"time"
)

// LastRunEnd returns when the latest run ended (zero when none has).
func (s *Store) LastRunEnd(ctx context.Context) (time.Time, error) {
	var v int64
	if err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(ended_at), 0) FROM runs`).Scan(&v); err != nil {
		return time.Time{}, fmt.Errorf("last run end: %w", err)
	}
	return fromMS(v), nil
}
