// Package render holds boxctl's renderers for a person at a terminal: the
// tables and status lines its commands print (the conformance run's
// progress, a create's phase timings, the boxes, what gc collected, the
// pools). JSON output is the commands' own, never rendered here.
package render

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/conformance"
)

// ProgressView shows a run as it goes: a line per finished case ("pass",
// "FAIL" with what it got or its first cleanup failure, "n/a " with the
// capability it needs) and, on a terminal, a status line below them that
// counts the cases running, passed, failed and not applicable and names
// the running ones. Pass its Update as Options.Progress, and call Close
// when Run returns.
type ProgressView struct {
	w       io.Writer
	tty     bool
	running []string
	pass    int
	fail    int
	na      int
	drawn   bool // the status line is on screen
}

// NewProgressView returns a view that writes to w; terminal says whether w
// is a terminal, where the status line is drawn and redrawn in place.
func NewProgressView(w io.Writer, terminal bool) *ProgressView {
	return &ProgressView{w: w, tty: terminal}
}

// IsTerminal reports whether w is a character device (a terminal): the
// terminal argument of NewProgressView.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Update shows one progress report. Run makes one call at a time.
func (v *ProgressView) Update(p conformance.Progress) {
	id := p.Harness + "/" + p.Case.ID
	if p.Result == nil {
		v.running = append(v.running, id)
		v.status()
		return
	}
	v.running = slices.DeleteFunc(v.running, func(s string) bool { return s == id })
	r := p.Result
	mark, detail := "pass", ""
	switch r.Outcome {
	case conformance.Fail:
		v.fail++
		mark = "FAIL"
		switch {
		case r.Evidence != nil:
			detail = "got " + r.Evidence.Got
		case len(r.Cleanup) > 0:
			detail = "cleanup: " + r.Cleanup[0]
		}
	case conformance.NotApplicable:
		v.na++
		mark, detail = "n/a ", "needs "+r.Capability
	default:
		v.pass++
	}
	v.clear()
	line := fmt.Sprintf("%s  %-44s %6.1fs", mark, id, r.Seconds)
	if detail != "" {
		line += "  " + OneLine(detail, 80)
	}
	fmt.Fprintln(v.w, line)
	v.status()
}

// status redraws the status line on a terminal.
func (v *ProgressView) status() {
	if !v.tty {
		return
	}
	v.clear()
	s := fmt.Sprintf("running %d · passed %d · failed %d · n/a %d", len(v.running), v.pass, v.fail, v.na)
	if len(v.running) > 0 {
		s += " · " + strings.Join(v.running, ", ")
	}
	fmt.Fprint(v.w, OneLine(s, 120))
	v.drawn = true
}

// clear erases the status line.
func (v *ProgressView) clear() {
	if v.drawn {
		fmt.Fprint(v.w, "\r\x1b[K")
		v.drawn = false
	}
}

// Close erases the status line for what follows.
func (v *ProgressView) Close() { v.clear() }

// OneLine flattens s to one line of at most n runes, ending in "…" when
// cut.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
