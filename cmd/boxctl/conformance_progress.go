package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tangle-network/boxctl/conformance"
)

// progressView shows a conformance run as it goes, on stderr: a line per
// finished case, and on a terminal a status line below them that counts
// the cases running, passed, failed and not applicable and names the
// running ones. The runner calls update one call at a time.
type progressView struct {
	w       io.Writer
	tty     bool
	running []string
	pass    int
	fail    int
	na      int
	drawn   bool // the status line is on screen
}

func newProgressView(w io.Writer) *progressView {
	return &progressView{w: w, tty: isTerminal(w)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (v *progressView) update(p conformance.Progress) {
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
		line += "  " + oneLine(detail, 80)
	}
	fmt.Fprintln(v.w, line)
	v.status()
}

// status redraws the status line on a terminal.
func (v *progressView) status() {
	if !v.tty {
		return
	}
	v.clear()
	s := fmt.Sprintf("running %d · passed %d · failed %d · n/a %d", len(v.running), v.pass, v.fail, v.na)
	if len(v.running) > 0 {
		s += " · " + strings.Join(v.running, ", ")
	}
	fmt.Fprint(v.w, oneLine(s, 120))
	v.drawn = true
}

// clear erases the status line.
func (v *progressView) clear() {
	if v.drawn {
		fmt.Fprint(v.w, "\r\x1b[K")
		v.drawn = false
	}
}

// close erases the status line for what follows.
func (v *progressView) close() { v.clear() }
