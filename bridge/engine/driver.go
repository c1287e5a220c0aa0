package engine

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// maxBatch is the most output lines handled between two looks at the
// run's other events (cancel, deadlines, commits).
const maxBatch = 512

// maxPending is the most frames waiting for the committer before the run
// stops reading the harness's output.
const maxPending = 8192

// driver reads one turn's output from a harness process and stops the
// process when the turn must stop. It is the one loop every kind of run
// goes through: a one-shot run, a retained turn in a process of its own,
// and a retained turn in its session's long-lived process (stays).
//
// Each output line goes to handle, whose frames a committer goroutine
// appends to the run's events in batches while the next lines are
// parsed; readers are woken after each commit. The driver stops the
// process's group on a cancel (an interrupt line first when the harness
// has one: the turn then ends with its own terminal event; otherwise
// SIGTERM, then SIGKILL after KillGrace), when the harness printed nothing
// for IdleTimeout or the run outlived its deadline (SIGKILL), and when the
// store refuses events. After the terminal event a process of its own gets
// ResultGrace to exit (its stdin closed) before it is killed; a session's
// long-lived process is left running and the driver returns at once.
//
// The caller sets the fields above the line, calls run once, and reads
// the outcome below it.
type driver struct {
	e    *Engine
	l    *liveRun
	log  *slog.Logger
	proc *process
	// idle and deadline are the run's watchdogs; a turn that runs in
	// more than one process shares them.
	idle, deadline *time.Timer
	// cancel is the run's cancel channel, or nil once a cancel was taken
	// (run leaves it nil when it took one).
	cancel <-chan struct{}
	// handle turns one output line into frames.
	handle func(line []byte) [][]byte
	// flush, when set, returns the frames handle held back; the driver
	// calls it at the end of each batch of lines.
	flush func() [][]byte
	// ended reports whether the turn's terminal event was handled.
	ended func() bool
	// stays marks a session's long-lived process: run returns at the
	// terminal event and leaves it running.
	stays bool
	// interrupt, when set, returns the stdin line that asks the harness
	// to stop its turn on a caller's cancel (nil when it cannot yet).
	interrupt func() []byte

	// stopReason is why the driver stopped the turn ("" when the
	// harness ended it, or only lingered after its terminal event).
	stopReason string
	// killed: the driver signalled the process group, so the process
	// cannot serve another turn.
	killed bool
	// interrupted: a cancel was sent as the interrupt line.
	interrupted bool
	// heard: the process printed at least one line.
	heard bool
	// gone: the process exited or its output ended.
	gone bool
}

// run drives the turn until the process is gone (or, when it stays,
// until the terminal event), then waits until every frame is committed.
// A failed commit stops the turn with stopReason TypeServerError.
func (d *driver) run() {
	e, proc := d.e, d.proc
	commits := make(chan [][]byte)
	commitErr := make(chan error, 1)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		for batch := range commits {
			if _, err := e.store.Append(context.Background(), d.l.id, batch); err != nil {
				commitErr <- err
				for range commits { // the turn is being stopped
				}
				return
			}
			d.l.bc.notify()
		}
	}()

	var (
		pending               [][]byte
		lines, exited         = proc.lines, proc.exited
		graceC, killC, drainC <-chan time.Time
	)
	stop := func(reason string, soft bool) {
		if d.stopReason == "" {
			d.stopReason = reason
		}
		d.killed = true
		if soft {
			killGroup(proc.pgid, syscall.SIGTERM)
			killC = time.After(e.opts.KillGrace)
			return
		}
		killGroup(proc.pgid, syscall.SIGKILL)
	}
	for (lines != nil || exited != nil) && !(d.stays && d.ended()) {
		var sendC chan<- [][]byte
		if len(pending) > 0 {
			sendC = commits
		}
		linesC := lines
		if len(pending) >= maxPending {
			linesC = nil // the committer is behind: let the pipe push back
		}
		select {
		case sendC <- pending:
			pending = nil
		case line, ok := <-linesC:
			if !ok {
				lines = nil
				continue
			}
			d.heard = true
			d.idle.Reset(e.opts.IdleTimeout)
			pending = append(pending, d.handle(line)...)
		drain:
			for n := 1; n < maxBatch && !(d.stays && d.ended()); n++ {
				select {
				case line, ok := <-lines:
					if !ok {
						lines = nil
						break drain
					}
					pending = append(pending, d.handle(line)...)
				default:
					break drain
				}
			}
			if d.flush != nil {
				pending = append(pending, d.flush()...)
			}
			if !d.stays && d.ended() && graceC == nil && exited != nil {
				proc.closeStdin()
				graceC = time.After(e.opts.ResultGrace)
			}
		case err := <-commitErr:
			d.log.Error("append events", "err", err)
			pending = nil
			stop(wire.TypeServerError, false)
		case <-exited:
			exited = nil
			// Whatever the leader left in its group goes with it.
			killGroup(proc.pgid, syscall.SIGKILL)
			if lines != nil {
				drainC = time.After(e.opts.ResultGrace)
			}
		case <-drainC:
			// Something outside the group holds stdout open: stop reading.
			proc.stdout.Close()
			drainC = nil
		case <-graceC:
			d.log.Debug("harness still running after its terminal line; killing it")
			stop("", false)
			graceC = nil
		case <-d.idle.C:
			if !d.ended() {
				stop(wire.TypeHarnessStalled, false)
			}
		case <-d.deadline.C:
			if !d.ended() {
				stop(wire.TypeHarnessTimeout, false)
			}
		case <-d.cancel:
			d.cancel = nil
			if d.ended() {
				continue
			}
			reason, _ := d.l.cancelReason.Load().(string)
			var line []byte
			if d.interrupt != nil {
				line = d.interrupt()
			}
			if reason == wire.TypeRunCancelled && line != nil && proc.writeStdin(line) == nil {
				// The turn ends with its terminal event; the process stays.
				d.stopReason, d.interrupted = reason, true
				killC = time.After(e.opts.KillGrace)
				continue
			}
			stop(reason, true)
		case <-killC:
			killC = nil
			stop("", false)
		}
	}
	d.gone = lines == nil || exited == nil
	// Hand over what is left and wait until every frame is committed (or
	// the committer failed), so the run's end comes last.
	if len(pending) > 0 && d.stopReason != wire.TypeServerError {
		select {
		case commits <- pending:
		case err := <-commitErr:
			d.log.Error("append events", "err", err)
			d.stopReason = wire.TypeServerError
		}
	}
	close(commits)
	<-committed
	select {
	case err := <-commitErr:
		d.log.Error("append events", "err", err)
		d.stopReason = wire.TypeServerError
	default:
	}
}

// watchdogs returns the idle and deadline timers of a run on backend
// timeout (0 for none) and the deadline's length.
func (e *Engine) watchdogs(timeout time.Duration) (idle, deadline *time.Timer, limit time.Duration) {
	limit = e.opts.MaxLifetime
	if timeout > 0 && timeout < limit {
		limit = timeout
	}
	return time.NewTimer(e.opts.IdleTimeout), time.NewTimer(limit), limit
}
