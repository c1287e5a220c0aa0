package render

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/boxstate"
)

// Rows writes rows as a text table for people, deadlines relative to
// now, or "no boxes". A box the state does not know is marked with "*",
// explained below the table.
func Rows(w io.Writer, rows []boxstate.Row, now time.Time) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no boxes")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	metered := slices.ContainsFunc(rows, func(r boxstate.Row) bool { return r.Usage != nil })
	confined := slices.ContainsFunc(rows, func(r boxstate.Row) bool { return r.Egress != "" })
	fmt.Fprint(tw, "ID\tSTATE\tRUN TAG\tOWNER\tDEADLINE\tHARNESS")
	if confined {
		fmt.Fprint(tw, "\tEGRESS")
	}
	if metered {
		fmt.Fprint(tw, "\tMODEL USE")
	}
	fmt.Fprintln(tw)
	unknown := false
	for _, r := range rows {
		id := boxstate.ShortID(r.ID)
		if !r.InState {
			id += "*"
			unknown = true
		}
		harness := r.Harness
		if harness == "" {
			harness = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", id, r.State, r.RunTag, dash(r.Owner), deadlineText(r.Deadline, now), harness)
		if confined {
			fmt.Fprintf(tw, "\t%s", dash(r.Egress))
		}
		if metered {
			use := "-"
			if u := r.Usage; u != nil {
				use = fmt.Sprintf("%d requests, %d in / %d out tokens", u.Requests, u.InputTokens, u.OutputTokens)
			}
			fmt.Fprintf(tw, "\t%s", use)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if unknown {
		_, err := fmt.Fprintln(w, "* not in this user's state: turn cannot drive it; exec, logs and rm can")
		return err
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// deadlineText renders a deadline relative to now.
func deadlineText(d, now time.Time) string {
	if d.IsZero() {
		return "-"
	}
	left := d.Sub(now).Round(time.Second)
	if left <= 0 {
		return "passed " + (-left).String() + " ago"
	}
	return "in " + left.String()
}

// Collected writes what Collect did (or, with DryRun, would do) as
// text, a line a box or record.
func Collected(w io.Writer, res boxstate.Collected) error {
	verb, forgot, suspend := "removed", "forgot", "suspended"
	if res.DryRun {
		verb, forgot, suspend = "would remove", "would forget", "would suspend"
	}
	if len(res.Removed) == 0 && len(res.Forgotten) == 0 && len(res.Suspended) == 0 {
		_, err := fmt.Fprintln(w, "nothing to collect")
		return err
	}
	if err := writeEntries(w, res.Removed, verb, "remove"); err != nil {
		return err
	}
	for _, r := range res.Forgotten {
		id := boxstate.ShortID(r.ID)
		if id == "" {
			id = "a box being created"
		}
		if _, err := fmt.Fprintf(w, "%s %s (run %s): %s\n", forgot, id, r.RunTag, r.Reason); err != nil {
			return err
		}
	}
	return writeEntries(w, res.Suspended, suspend, "suspend")
}

// writeEntries writes a line a box: done (the verb of what Collect did),
// or that it could not do what.
func writeEntries(w io.Writer, es []boxstate.Entry, done, what string) error {
	for _, r := range es {
		line := fmt.Sprintf("%s %s (run %s): %s", done, boxstate.ShortID(r.ID), r.RunTag, r.Reason)
		if r.Error != "" {
			line = fmt.Sprintf("could not %s %s (run %s, %s): %s", what, boxstate.ShortID(r.ID), r.RunTag, r.Reason, r.Error)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
