package engine

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// maxBatch is about the most output lines handled between two looks at
// the run's other events (cancel, deadlines, commits): the lines of the
// batches the process's reader sent (process.lines) until that many.
const maxBatch = 512

// maxPending is the most frames waiting for the committer before the run
// stops reading the harness's output.
const maxPending = 8192

// commitWindow is the least time between two commits of a run while its
// harness prints faster than that: the frames of a burst are committed
// (and sent to readers) together, at most commitWindow late, rather than
// in as many transactions as the store can take. A frame that comes after
// a quiet spell is committed at once, and so is the turn's last batch;
// commitBatch frames are committed without waiting for the window.
// A commit's cost (a sync of the log) hardly depends on its size, so a
// burst is cheapest in few commits; 16 ms late is still far below what a
// reader of a stream notices.
const (
	commitWindow = 16 * time.Millisecond
	commitBatch  = 4096
)

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
	// handle turns one output line into frames. The driver copies the
	// slice it returns before the next call, which may reuse it; the
	// frames' bytes must stay as they are.
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
	// to stop its turn on a caller's cancel (nil: it cannot be asked).
	interrupt func() []byte
	// beforeCommit, when set, is called by the committer before each
	// commit, and once before the first: the turn's own records (its
	// process group, its native session) are written off the path of
	// its output, and before the events that follow them.
	beforeCommit func()
	// holdEnd: the frames pending when the turn ends (within
	// commitWindow of its terminal event) are not committed but left in
	// leftover, for the caller to commit with the run's end in one
	// transaction.
	holdEnd bool

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
	// leftover are the frames held for the run's end (holdEnd).
	leftover [][]byte
}

// run drives the turn until the process is gone (or, when it stays,
// until the terminal event), then waits until every frame is committed.
// A failed commit stops the turn with stopReason TypeServerError.
func (d *driver) run() {
	d.l.awaitOutput()
	r := &drive{driver: d, lines: d.proc.lines, exited: d.proc.exited, window: time.NewTimer(commitWindow)}
	r.window.Stop()
	defer r.window.Stop()
	r.startCommitter()
	for (r.lines != nil || r.exited != nil) && !(d.stays && d.ended()) {
		r.step()
	}
	d.gone = r.lines == nil || r.exited == nil
	r.finish()
}

// drive is the state of one run of a driver: the frames waiting for the
// committer, the process's channels still open, and the timers armed.
type drive struct {
	*driver
	commits   chan [][]byte
	commitErr chan error
	committed chan struct{}

	pending               [][]byte
	lines                 <-chan [][]byte
	exited                <-chan struct{}
	graceC, killC, drainC <-chan time.Time
	lastCommit            time.Time // when pending last went to the committer
	endedAt               time.Time // when the terminal event was handled (holdEnd)
	window                *time.Timer
	windowC               <-chan time.Time
}

// startCommitter starts the committer: it appends each batch sent on
// commits to the run's events, in order, reports the first failure on
// commitErr (and then only drains commits), and closes committed once
// commits is closed.
func (r *drive) startCommitter() {
	r.commits, r.commitErr, r.committed = make(chan [][]byte), make(chan error, 1), make(chan struct{})
	go func() {
		defer close(r.committed)
		if r.beforeCommit != nil {
			r.beforeCommit()
		}
		for batch := range r.commits {
			if r.beforeCommit != nil {
				r.beforeCommit()
			}
			last, err := r.e.store.Append(context.Background(), r.l.id, batch)
			if err != nil {
				r.commitErr <- err
				for range r.commits { // the turn is being stopped
				}
				return
			}
			r.l.committedFrames(last, batch)
		}
	}()
}

// step waits for the next thing that happens to the turn and handles it.
func (r *drive) step() {
	linesC := r.lines
	if len(r.pending) >= maxPending {
		linesC = nil // the committer is behind: let the pipe push back
	}
	select {
	case r.commitDue() <- r.pending:
		r.pending, r.lastCommit = nil, time.Now()
	case <-r.windowC:
		r.windowC = nil
	case batch, ok := <-linesC:
		if !ok {
			r.lines = nil
			return
		}
		r.output(batch)
	case err := <-r.commitErr:
		r.log.Error("append events", "err", err)
		r.pending = nil
		r.stop(wire.TypeServerError, false)
	case <-r.exited:
		r.exited = nil
		// Whatever the leader left in its group goes with it.
		killGroup(r.proc.pgid, syscall.SIGKILL)
		if r.lines != nil {
			r.drainC = time.After(r.e.opts.ResultGrace)
		}
	case <-r.drainC:
		// Something outside the group holds stdout open: stop reading.
		r.proc.stdout.Stop()
		r.drainC = nil
	case <-r.graceC:
		r.log.Debug("harness still running after its terminal line; killing it")
		r.stop("", false)
		r.graceC = nil
	case <-r.idle.C:
		if !r.ended() {
			r.stop(wire.TypeHarnessStalled, false)
		}
	case <-r.deadline.C:
		if !r.ended() {
			r.stop(wire.TypeHarnessTimeout, false)
		}
	case <-r.cancel:
		r.cancelled()
	case <-r.killC:
		r.killC = nil
		r.stop("", false)
	}
}

// commitDue is the committer's channel when the pending frames are due
// (nil otherwise, with the window armed for when they will be): once
// commitWindow passed since the last commit, or since the terminal event
// of a turn whose end holds them, or once commitBatch of them wait.
func (r *drive) commitDue() chan<- [][]byte {
	if len(r.pending) == 0 {
		return nil
	}
	since := r.lastCommit
	if !r.endedAt.IsZero() {
		// The process is about to exit: what is pending goes with the
		// run's end unless the exit takes longer.
		since = r.endedAt
	}
	if wait := commitWindow - time.Since(since); wait <= 0 || len(r.pending) >= commitBatch {
		return r.commits
	} else if r.windowC == nil {
		r.window.Reset(wait)
		r.windowC = r.window.C
	}
	return nil
}

// output handles a batch of output lines and the batches the reader
// holds already, up to maxBatch lines, and arms the end of a turn that
// printed its terminal event.
func (r *drive) output(batch [][]byte) {
	r.heard = true
	r.l.heard()
	r.idle.Reset(r.e.opts.IdleTimeout)
	n := r.take(batch)
drain:
	for n < maxBatch && !(r.stays && r.ended()) {
		select {
		case batch, ok := <-r.lines:
			if !ok {
				r.lines = nil
				break drain
			}
			n += r.take(batch)
		default:
			break drain
		}
	}
	if r.flush != nil {
		r.pending = append(r.pending, r.flush()...)
	}
	if r.holdEnd && r.endedAt.IsZero() && r.ended() {
		r.endedAt = time.Now()
	}
	if !r.stays && r.ended() && r.graceC == nil && r.exited != nil {
		r.proc.closeStdin()
		r.graceC = time.After(r.e.opts.ResultGrace)
	}
}

// take handles a batch of lines, up to the terminal event of a turn whose
// process stays (what follows it belongs to no turn), and returns how
// many lines it handled.
func (r *drive) take(batch [][]byte) int {
	for i, line := range batch {
		if r.stays && r.ended() {
			return i
		}
		r.pending = append(r.pending, r.handle(line)...)
	}
	return len(batch)
}

// cancelled handles a cancel of the turn: the harness is asked to stop
// its turn when it can be, else its group is sent SIGTERM.
func (r *drive) cancelled() {
	r.cancel = nil
	if r.ended() {
		return
	}
	reason, _ := r.l.cancelReason.Load().(string)
	if line := r.interruptLine(reason); line != nil && r.proc.writeStdin(line) == nil {
		// The turn ends with its terminal event; the process stays.
		r.stopReason, r.interrupted = reason, true
		r.killC = time.After(r.e.opts.KillGrace)
		return
	}
	r.stop(reason, true)
}

// stop stops the turn for reason (the first reason stands): soft, with
// SIGTERM and SIGKILL after KillGrace; else with SIGKILL at once.
func (r *drive) stop(reason string, soft bool) {
	if r.stopReason == "" {
		r.stopReason = reason
	}
	r.killed = true
	if soft {
		killGroup(r.proc.pgid, syscall.SIGTERM)
		r.killC = time.After(r.e.opts.KillGrace)
		return
	}
	killGroup(r.proc.pgid, syscall.SIGKILL)
}

// finish hands over what is left (held for the run's end, or committed)
// and waits until every frame is committed or the committer failed, so
// that the run's end comes last.
func (r *drive) finish() {
	if len(r.pending) > 0 && r.holdEnd && r.stopReason != wire.TypeServerError {
		r.leftover, r.pending = r.pending, nil
	}
	if len(r.pending) > 0 && r.stopReason != wire.TypeServerError {
		select {
		case r.commits <- r.pending:
		case err := <-r.commitErr:
			r.log.Error("append events", "err", err)
			r.stopReason = wire.TypeServerError
		}
	}
	close(r.commits)
	<-r.committed
	select {
	case err := <-r.commitErr:
		r.log.Error("append events", "err", err)
		r.stopReason = wire.TypeServerError
	default:
	}
}

// interruptLine returns the stdin line that interrupts the turn for a stop
// of reason, or nil when the turn is to be stopped by a signal: only a
// caller's cancel is asked of the harness.
func (d *driver) interruptLine(reason string) []byte {
	if reason != wire.TypeRunCancelled || d.interrupt == nil {
		return nil
	}
	return d.interrupt()
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
