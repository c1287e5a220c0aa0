package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/store"
	"github.com/tangle-network/boxctl/bridge/wire"
)

// maxBatch is the most output lines handled between two looks at the
// run's other events (cancel, deadlines, commits).
const maxBatch = 512

// maxPending is the most frames waiting for the committer before the run
// stops reading the harness's output.
const maxPending = 8192

// process is a started harness.
type process struct {
	cmd     *exec.Cmd
	pgid    int
	lines   chan []byte   // stdout lines; closed at EOF
	exited  chan struct{} // closed once the leader was reaped
	exitErr error
	stderr  *tail
	errDone chan struct{} // closed at stderr EOF
	stdout  *os.File
	// closeStdin ends a held stdin (harness.Command.HoldStdin); it is
	// safe to call more than once, and a no-op otherwise.
	closeStdin func()
	// writeStdin writes to a held stdin after its first contents; it
	// fails once stdin is closed.
	writeStdin func([]byte) error
}

func startProcess(spec harness.Command, marker string) (*process, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(append([]string(nil), spec.Env...), marker)
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inW *os.File
	if spec.Stdin != nil {
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, err
		}
		cmd.Stdin = inR
		defer inR.Close()
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return nil, err
	}
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, lines: make(chan []byte, 1024),
		exited: make(chan struct{}), stderr: &tail{max: 4096}, errDone: make(chan struct{}), stdout: outR}
	p.closeStdin = func() {}
	p.writeStdin = func([]byte) error { return os.ErrClosed }
	if inW != nil {
		var once sync.Once
		var wmu sync.Mutex // orders the first write before later ones
		p.closeStdin = func() { once.Do(func() { inW.Close() }) }
		p.writeStdin = func(b []byte) error {
			wmu.Lock()
			defer wmu.Unlock()
			_, err := inW.Write(b)
			return err
		}
		wmu.Lock()
		go func() {
			inW.Write(spec.Stdin)
			wmu.Unlock()
			if !spec.HoldStdin {
				p.closeStdin()
			}
		}()
	}
	go func() {
		io.Copy(p.stderr, errR)
		errR.Close()
		close(p.errDone)
	}()
	go func() {
		defer close(p.lines)
		defer outR.Close()
		br := bufio.NewReaderSize(outR, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				p.lines <- trimEOL(line)
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// execute runs one turn to its end and finishes the run in the store.
func (e *Engine) execute(l *liveRun, req StartRequest, started time.Time) {
	ctx := context.Background() // the run outlives the request that started it
	log := e.log.With("run", l.id)
	ch := &chunker{id: "chatcmpl-" + l.id, model: req.ModelID, created: started.Unix()}
	finish := func(f store.Finish, frames [][]byte) {
		if _, err := e.store.Finish(ctx, l.id, f, frames); err != nil {
			log.Error("finish run", "err", err)
		}
		// Leave the live set before announcing the end, so whoever sees
		// the run terminal also sees its admission slot free.
		e.mu.Lock()
		delete(e.live, l.id)
		e.mu.Unlock()
		close(l.done)
		l.bc.notify()
	}
	fail := func(typ, msg string) {
		finish(store.Finish{Status: store.StatusError, ErrType: typ, ErrMessage: msg},
			[][]byte{errorFrame(wire.ErrorBody{Type: typ, Message: msg})})
	}

	b := req.Backend
	name := b.Adapter.Name()
	native, err := e.store.NativeSession(ctx, req.SessionID, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		fail(wire.TypeServerError, "look up session: "+err.Error())
		return
	}
	stateDir, err := e.sessionDir(name, req.SessionID)
	if err != nil {
		fail(wire.TypeServerError, err.Error())
		return
	}
	spec, err := b.Adapter.Command(harness.Turn{
		RunID: l.id, Bin: b.Bin, Model: req.Model, Messages: req.Messages, NativeSessionID: native,
		Cwd: req.Cwd, StateDir: stateDir, Environ: e.opts.Environ, Env: req.Env,
		RouterURL: e.opts.RouterURL, RouterKey: e.opts.RouterKey, Effort: req.Effort,
	})
	if err != nil {
		fail(wire.TypeHarnessError, redact(err.Error(), e.opts.Secrets))
		return
	}
	if err := harness.WriteFiles(spec.Files); err != nil {
		fail(wire.TypeHarnessError, redact(err.Error(), e.opts.Secrets))
		return
	}
	proc, err := startProcess(spec, MarkerVar+"="+l.id)
	if err != nil {
		fail(wire.TypeHarnessUnavailable, "start "+name+": "+redact(err.Error(), e.opts.Secrets))
		return
	}
	if err := e.store.SetProcess(ctx, l.id, proc.pgid); err != nil {
		log.Error("record process group", "err", err)
	}
	log.Debug("harness started", "pgid", proc.pgid, "bin", b.Bin)

	limit := e.opts.MaxLifetime
	if b.Timeout > 0 && b.Timeout < limit {
		limit = b.Timeout
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	idle := time.NewTimer(e.opts.IdleTimeout)
	defer idle.Stop()

	defer proc.closeStdin()
	parser := spec.Parser
	if parser == nil {
		parser = b.Adapter.NewParser()
	}
	var (
		end        *harness.Event
		stopReason string
		lines      = proc.lines
		exited     = proc.exited
		cancel     = l.cancel
		graceC     <-chan time.Time // after the terminal line
		killC      <-chan time.Time // after SIGTERM
		drainC     <-chan time.Time // after the leader exited with stdout still open
	)
	stop := func(reason string, soft bool) {
		if stopReason == "" {
			stopReason = reason
		}
		if soft {
			killGroup(proc.pgid, syscall.SIGTERM)
			killC = time.After(e.opts.KillGrace)
			return
		}
		killGroup(proc.pgid, syscall.SIGKILL)
	}
	handle := func(line []byte, batch [][]byte) [][]byte {
		for _, ev := range parser.Line(line) {
			switch ev.Kind {
			case harness.KindSession:
				if err := e.store.PutNativeSession(ctx, req.SessionID, name, ev.NativeSessionID); err != nil {
					log.Error("record native session", "err", err)
				}
			case harness.KindEnd:
				if end == nil {
					end = &ev
				}
			default:
				batch = append(batch, ch.frames(ev)...)
			}
		}
		return batch
	}

	// Commits run on their own goroutine, so the harness's output is
	// parsed while the previous batch is made durable; frames that arrive
	// meanwhile go out together in the next batch. The committer is the
	// only writer of the run's events and tells readers after each commit.
	commits := make(chan [][]byte)
	commitErr := make(chan error, 1)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		for batch := range commits {
			if _, err := e.store.Append(ctx, l.id, batch); err != nil {
				commitErr <- err
				for range commits { // the run is being stopped
				}
				return
			}
			l.bc.notify()
		}
	}()
	var pending [][]byte
	for lines != nil || exited != nil {
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
			idle.Reset(e.opts.IdleTimeout)
			pending = handle(line, pending)
		drain:
			for n := 1; n < maxBatch; n++ {
				select {
				case line, ok := <-lines:
					if !ok {
						lines = nil
						break drain
					}
					pending = handle(line, pending)
				default:
					break drain
				}
			}
			if end != nil && graceC == nil && exited != nil {
				proc.closeStdin()
				graceC = time.After(e.opts.ResultGrace)
			}
		case err := <-commitErr:
			log.Error("append events", "err", err)
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
			log.Debug("harness still running after its terminal line; killing it")
			stop("", false)
			graceC = nil
		case <-idle.C:
			if end == nil {
				stop(wire.TypeHarnessStalled, false)
			}
		case <-deadline.C:
			if end == nil {
				stop(wire.TypeHarnessTimeout, false)
			}
		case <-cancel:
			cancel = nil
			if end == nil {
				reason, _ := l.cancelReason.Load().(string)
				stop(reason, true)
			}
		case <-killC:
			killC = nil
			killGroup(proc.pgid, syscall.SIGKILL)
		}
	}
	// Hand over what is left and wait until every frame is committed (or
	// the committer failed), so the terminal frames come last.
	if len(pending) > 0 && stopReason != wire.TypeServerError {
		select {
		case commits <- pending:
		case err := <-commitErr:
			log.Error("append events", "err", err)
			stopReason = wire.TypeServerError
		}
	}
	close(commits)
	<-committed
	select {
	case err := <-commitErr:
		log.Error("append events", "err", err)
		stopReason = wire.TypeServerError
	default:
	}
	killGroup(proc.pgid, syscall.SIGKILL)

	switch {
	case end != nil && stopReason != wire.TypeServerError:
		f := store.Finish{Status: store.StatusDone}
		if end.Err != nil {
			f = store.Finish{Status: store.StatusError, ErrType: end.Err.Type, ErrMessage: end.Err.Message}
		}
		finish(f, ch.end(*end))
	case stopReason == wire.TypeRunCancelled:
		msg := "the run was cancelled; its process group was killed"
		finish(store.Finish{Status: store.StatusCancelled, ErrType: wire.TypeRunCancelled, ErrMessage: msg},
			[][]byte{errorFrame(wire.ErrorBody{Type: wire.TypeRunCancelled, Message: msg})})
	case stopReason == wire.TypeBridgeShutdown:
		fail(stopReason, "the bridge shut down while the run was live; its process group was killed")
	case stopReason == wire.TypeHarnessStalled:
		fail(stopReason, fmt.Sprintf("%s printed nothing for %s; its process group was killed", name, e.opts.IdleTimeout)+diagnosis(parser, e.opts.Secrets))
	case stopReason == wire.TypeHarnessTimeout:
		frame := errorFrame(wire.ErrorBody{Type: stopReason, Code: wire.FinishTimeout,
			Message: fmt.Sprintf("the turn exceeded its deadline of %s; its process group was killed", limit) + diagnosis(parser, e.opts.Secrets)})
		finish(store.Finish{Status: store.StatusError, ErrType: stopReason, ErrMessage: "turn deadline exceeded"}, [][]byte{frame})
	case stopReason == wire.TypeServerError:
		fail(stopReason, "the bridge could not store the run's events")
	default:
		select { // let the last stderr bytes arrive
		case <-proc.errDone:
		case <-time.After(500 * time.Millisecond):
		}
		msg := fmt.Sprintf("%s exited (%s) before finishing the turn", name, exitStatus(proc.exitErr))
		if t := proc.stderr.String(e.opts.Secrets); t != "" {
			msg += "; stderr: " + t
		}
		fail(wire.TypeHarnessError, msg)
	}
	log.Debug("run finished")
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal " + ws.Signal().String()
		}
		return fmt.Sprintf("status %d", ee.ExitCode())
	}
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// diagnosis is what parser says about a turn that never ended, as a
// suffix of an error message ("" if nothing).
func diagnosis(parser harness.Parser, secrets []string) string {
	if d, ok := parser.(harness.Diagnoser); ok {
		if msg := d.Diagnosis(); msg != "" {
			return "; " + redact(msg, secrets)
		}
	}
	return ""
}
