package render

import (
	"fmt"
	"io"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

// Timings writes the phase table of a create (Environment.Timings):
// each phase, how long it took and its share of the whole, then the
// total. A phase the create failed in is marked.
func Timings(w io.Writer, phases []sandbox.Phase) error {
	total := sandbox.Total(phases)
	if _, err := fmt.Fprintf(w, "%-14s %10s %6s\n", "phase", "took", "share"); err != nil {
		return err
	}
	for _, p := range phases {
		share := 0.0
		if total > 0 {
			share = 100 * float64(p.Duration) / float64(total)
		}
		mark := ""
		if p.Failed {
			mark = "  failed"
		}
		if _, err := fmt.Fprintf(w, "%-14s %10s %5.1f%%%s\n", p.Name, millis(p.Duration), share, mark); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%-14s %10s %5.1f%%\n", "total", millis(total), 100.0)
	return err
}

// millis formats d in milliseconds with one decimal.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
