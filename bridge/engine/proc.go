package engine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/tangle-network/boxctl/bridge/harness"
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

// killLeftovers ends the processes a previous incarnation left for a run:
// every process whose environment holds marker, and the process group
// pgid when a marked process is still in it. It returns how many marked
// processes it found. Processes are checked for the marker so that a
// recycled pid or group id of an unrelated process is never signalled.
func killLeftovers(procDir string, pgid int, marker string) int {
	if marker == "" {
		return 0
	}
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return 0
	}
	found, groupMarked := 0, false
	want := []byte(marker)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(procDir, e.Name(), "environ"))
		if err != nil || !hasEntry(env, want) {
			continue
		}
		found++
		if pgid > 0 && processGroup(procDir, pid) == pgid {
			groupMarked = true
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if groupMarked {
		killGroup(pgid, syscall.SIGKILL)
	}
	return found
}

func hasEntry(environ, entry []byte) bool {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// processGroup reads a process's group id from /proc/<pid>/stat, or -1.
func processGroup(procDir string, pid int) int {
	b, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	// The command name is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return -1
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return g
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
	// A session of its own (and so a process group whose id is its pid):
	// no controlling terminal of the bridge's reaches the harness, so a
	// jailed one cannot type into it (TIOCSTI).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
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
