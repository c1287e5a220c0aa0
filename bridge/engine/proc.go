package engine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/harness"
	"github.com/tangle-network/boxctl/bridge/internal/pipe"
)

// MarkerVar is the environment variable set on every harness process (and
// inherited by its children) naming the run it belongs to.
const MarkerVar = "BOX_BRIDGE_RUN"

// killGroup signals a process group; a group that is already gone is not
// an error.
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the tail with every secret replaced, trimmed.
func (t *tail) String(secrets []string) string {
	t.mu.Lock()
	s := string(t.buf)
	t.mu.Unlock()
	return strings.TrimSpace(redact(s, secrets))
}

func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}

// process is a started harness.
type process struct {
	cmd     *exec.Cmd
	pgid    int
	lines   chan [][]byte // stdout lines, in batches of those read together; closed at EOF
	exited  chan struct{} // closed once the leader was reaped
	exitErr error
	stderr  *tail
	errDone chan struct{} // closed at stderr EOF
	stdout  *pipe.Reader
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
	// A session of its own (and so a process group whose id is its pid):
	// no controlling terminal of the bridge's reaches the harness, so a
	// jailed one cannot type into it (TIOCSTI).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pp, err := openPipes(spec.Stdin != nil)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pp.outW, pp.errW
	if pp.inR != nil {
		cmd.Stdin = pp.inR
	}
	err = cmd.Start()
	pp.closeChildEnds()
	if err != nil {
		pp.closeOurEnds()
		return nil, err
	}
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, lines: make(chan [][]byte, 64),
		exited: make(chan struct{}), stderr: &tail{max: 4096}, errDone: make(chan struct{}), stdout: pp.outR}
	p.holdStdin(pp.inW, spec)
	go func() {
		io.Copy(p.stderr, pp.errR)
		pp.errR.Close()
		close(p.errDone)
	}()
	go p.readLines()
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pipes are a harness's stdout and stderr pipes, and its stdin pipe when
// it is given one: the child's ends (outW, errW, inR) and ours.
type pipes struct {
	outR       *pipe.Reader
	outW, errW *os.File
	errR       *os.File
	inR, inW   *os.File
}

// openPipes opens a harness's pipes, a stdin pipe too when withStdin.
func openPipes(withStdin bool) (*pipes, error) {
	var p pipes
	var err error
	if p.outR, p.outW, err = pipe.Open(); err != nil {
		return nil, err
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeChildEnds()
		p.closeOurEnds()
		return nil, err
	}
	if withStdin {
		if p.inR, p.inW, err = os.Pipe(); err != nil {
			p.closeChildEnds()
			p.closeOurEnds()
			return nil, err
		}
	}
	return &p, nil
}

// closeChildEnds closes the ends the child was given, once it has them.
func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.outW, p.errW, p.inR} {
		if f != nil {
			f.Close()
		}
	}
}

// closeOurEnds closes the bridge's ends, when the child did not start.
func (p *pipes) closeOurEnds() {
	if p.outR != nil {
		p.outR.Close()
	}
	for _, f := range []*os.File{p.errR, p.inW} {
		if f != nil {
			f.Close()
		}
	}
}

// holdStdin writes spec.Stdin to the harness's stdin (inW, nil for none)
// and closes it after, unless spec.HoldStdin keeps it open for later
// writes (writeStdin), which wait for the first contents to be written.
func (p *process) holdStdin(inW *os.File, spec harness.Command) {
	p.closeStdin = func() {}
	p.writeStdin = func([]byte) error { return os.ErrClosed }
	if inW == nil {
		return
	}
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

// readLines reads the harness's stdout into p.lines, in batches, until
// EOF, and then closes both.
func (p *process) readLines() {
	defer close(p.lines)
	defer p.stdout.Close()
	br := bufio.NewReaderSize(p.stdout, 64<<10)
	var lr lineArena
	var sent time.Time
	for {
		// A batch is the lines the pipe holds: within a burst the next
		// one is read ReadWindow after the last (the pipe holds the lines
		// meanwhile), so that a burst costs a wake of the driver per
		// window, not one per line. A line after a quiet spell is read at
		// once.
		if wait := ReadWindow - time.Since(sent); wait > 0 {
			time.Sleep(wait)
		}
		var batch [][]byte
		var err error
		for {
			var line []byte
			line, err = lr.read(br)
			if len(line) > 0 {
				batch = append(batch, trimEOL(line))
			}
			if err != nil || len(batch) >= maxBatch || !lineBuffered(br) {
				break
			}
		}
		if len(batch) > 0 {
			p.lines <- batch
			sent = time.Now()
		}
		if err != nil {
			return
		}
	}
}

// ReadWindow is the least time between two reads of a harness's output
// while it prints faster than that.
const ReadWindow = time.Millisecond

// lineChunk is the size of the chunks a lineArena copies lines into.
const lineChunk = 64 << 10

// lineArena copies the lines it reads into shared chunks that it never
// writes again, so that a line stays valid for as long as it is held
// while reading one costs no allocation of its own.
type lineArena struct{ buf []byte }

// read reads the next line from br, with its newline (none at EOF).
func (a *lineArena) read(br *bufio.Reader) ([]byte, error) {
	start := len(a.buf)
	for {
		frag, err := br.ReadSlice('\n')
		if len(a.buf)+len(frag) > cap(a.buf) {
			// A fresh chunk, which the line read so far moves to.
			n := len(a.buf) - start + len(frag)
			fresh := make([]byte, 0, max(lineChunk, 2*n))
			a.buf, start = append(fresh, a.buf[start:]...), 0
		}
		a.buf = append(a.buf, frag...)
		if err != bufio.ErrBufferFull {
			return a.buf[start:len(a.buf):len(a.buf)], err
		}
	}
}

// lineBuffered reports whether br holds a whole line, which reading takes
// without waiting.
func lineBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
