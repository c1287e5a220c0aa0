package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/pool"
)

// Pools writes one line per pool: for a pool this machine keeps, its
// waiting boxes, those of keepers that are gone and its keepers; for a
// vendor's own pool, its ready and idle boxes and the age of the oldest.
func Pools(w io.Writer, rows []pool.Summary, now time.Time) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no pools")
		return err
	}
	for _, s := range rows {
		var err error
		if s.VendorKept {
			oldest := "-"
			if !s.Oldest.IsZero() {
				oldest = now.Sub(s.Oldest).Round(time.Second).String()
			}
			_, err = fmt.Fprintf(w, "%s\tready %d of %d\tidle %d\toldest %s\n", s.Name, s.Ready, s.Want, s.Idle, oldest)
		} else {
			_, err = fmt.Fprintf(w, "%s\tready %d\torphaned %d\tkeepers %s\n", s.Name, s.Ready, s.Orphaned, strings.Join(s.Keepers, ","))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// StatusLine rewrites a terminal's last line with a keeper's stats.
func StatusLine(w io.Writer, name string, s pool.Stats) {
	fmt.Fprintf(w, "\r\x1b[Kpool %s: %s", name, s)
}
