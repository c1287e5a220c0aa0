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
	e, proc := d.e, d.proc
	d.l.awaitOutput()
	commits := make(chan [][]byte)
	commitErr := make(chan error, 1)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		if d.beforeCommit != nil {
			d.beforeCommit()
		}
		for batch := range commits {
			if d.beforeCommit != nil {
				d.beforeCommit()
			}
			last, err := e.store.Append(context.Background(), d.l.id, batch)
			if err != nil {
				commitErr <- err
				for range commits { // the turn is being stopped
				}
				return
			}
			d.l.committedFrames(last, batch)
		}
	}()

	var (
		pending               [][]byte
		lines, exited         = proc.lines, proc.exited
		graceC, killC, drainC <-chan time.Time
		lastCommit            time.Time // when pending last went to the committer
		endedAt               time.Time // when the terminal event was handled (holdEnd)
		windowC               <-chan time.Time
	)
	window := time.NewTimer(commitWindow)
	window.Stop()
	defer window.Stop()
	// take handles a batch of lines, up to the terminal event of a turn
	// whose process stays (what follows it belongs to no turn), and
	// returns how many lines it handled.
	take := func(batch [][]byte) int {
		for i, line := range batch {
			if d.stays && d.ended() {
				return i
			}
			pending = append(pending, d.handle(line)...)
		}
		return len(batch)
	}
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
			since := lastCommit
			if !endedAt.IsZero() {
				// The process is about to exit: what is pending goes
				// with the run's end unless the exit takes longer.
				since = endedAt
			}
			if wait := commitWindow - time.Since(since); wait <= 0 || len(pending) >= commitBatch {
				sendC = commits
			} else if windowC == nil {
				window.Reset(wait)
				windowC = window.C
			}
		}
		linesC := lines
		if len(pending) >= maxPending {
			linesC = nil // the committer is behind: let the pipe push back
		}
		select {
		case sendC <- pending:
			pending, lastCommit = nil, time.Now()
		case <-windowC:
			windowC = nil
		case batch, ok := <-linesC:
			if !ok {
				lines = nil
				continue
			}
			d.heard = true
			d.l.heard()
			d.idle.Reset(e.opts.IdleTimeout)
			n := take(batch)
		drain:
			for n < maxBatch && !(d.stays && d.ended()) {
				select {
				case batch, ok := <-lines:
					if !ok {
						lines = nil
						break drain
					}
					n += take(batch)
				default:
					break drain
				}
			}
			if d.flush != nil {
				pending = append(pending, d.flush()...)
			}
			if d.holdEnd && endedAt.IsZero() && d.ended() {
				endedAt = time.Now()
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
			proc.stdout.Stop()
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
			if line := d.interruptLine(reason); line != nil && proc.writeStdin(line) == nil {
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
	if len(pending) > 0 && d.holdEnd && d.stopReason != wire.TypeServerError {
		d.leftover, pending = pending, nil
	}
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
