package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Keep runs the keeper in the foreground until ctx ends: it serves its
// metrics on metricsAddr (host:port, "" for none) at /metrics, rewrites
// its status line on status every second, and then drains the pool
// (Close).
func (p *Pool) Keep(ctx context.Context, metricsAddr string, status io.Writer) (err error) {
	defer func() {
		fmt.Fprintf(status, "\ndraining pool %s\n", p.o.Name)
		err = errors.Join(err, p.Close(context.WithoutCancel(ctx)))
	}()
	if metricsAddr != "" {
		stop, err := ServeMetrics(metricsAddr, p)
		if err != nil {
			return err
		}
		defer stop()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			fmt.Fprintf(status, "\r\x1b[K%s", p.Stats())
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

// WriteSummaries writes one line per pool.
func WriteSummaries(w io.Writer, rows []Summary) error {
	for _, s := range rows {
		if _, err := fmt.Fprintf(w, "%s\tready %d\torphaned %d\tkeepers %s\n", s.Name, s.Ready, s.Orphaned, strings.Join(s.Keepers, ",")); err != nil {
			return err
		}
	}
	return nil
}
