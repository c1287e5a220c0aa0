package pool

import (
	"context"
	"errors"
	"time"
)

var _ Keeper = (*Pool)(nil)

// Ensure does nothing more: a Pool boots its boxes from New on.
func (p *Pool) Ensure(context.Context) error { return nil }

// Keep runs the keeper until ctx ends, calling report (when not nil) with
// its stats every second, and then drains the pool (Close).
func (p *Pool) Keep(ctx context.Context, report func(Stats)) (err error) {
	defer func() { err = errors.Join(err, p.Close(context.WithoutCancel(ctx))) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if report != nil {
				report(p.Stats())
			}
		}
	}
}

// Summaries describes every pool with a file in dir ("" for DefaultDir).
func Summaries(dir string) ([]Summary, error) {
	names, err := Names(dir)
	if err != nil {
		return nil, err
	}
	out := []Summary{}
	for _, n := range names {
		s, err := Summarize(dir, n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
