package boxbridgetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options says how Start runs box-bridge. The zero value runs it with no
// environment but the variables Start sets, which serves no backend ready:
// name one in Env.
type Options struct {
	// Env is the rest of the bridge's environment as KEY=VALUE: backends
	// and their binaries (BRIDGE_BACKENDS, CLAUDE_BIN), the model endpoint
	// (TANGLE_ROUTER_URL, TANGLE_API_KEY), PATH, HOME, BRIDGE_LOG_LEVEL.
	// The bridge inherits nothing from the test process; append to
	// os.Environ() to pass it on. BRIDGE_HOST, BRIDGE_PORT, BRIDGE_BEARER
	// and BRIDGE_DATA_DIR are Start's and override entries here.
	Env []string
	// Bearer is the bearer token the bridge requires. Default: a random
	// one.
	Bearer string
	// DataDir is the bridge's durable state directory; pass an earlier
	// Proc's DataDir to restart on its state. Default: a new t.TempDir().
	DataDir string
	// Ready is how long Start waits for GET /health to answer 200.
	// Default 60s.
	Ready time.Duration
	// Poll is how often Start asks GET /health until it answers 200.
	// Default 50ms; a benchmark of the bridge's start polls finer.
	Poll time.Duration
	// Args are the bridge's flags (-supervise).
	Args []string
}

// Proc is a running box-bridge process.
type Proc struct {
	// URL is the bridge's base URL, http://127.0.0.1:PORT.
	URL string
	// Bearer is the token the bridge requires on every route but /health.
	Bearer string
	// DataDir is the bridge's durable state directory.
	DataDir string

	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{} // closed once the process has exited; err is set
	err  error
}

// startAttempts bounds the retries when another process takes the free
// port between Start choosing it and the bridge binding it.
const startAttempts = 3

// Start builds box-bridge (see Build), runs it with opts on a free loopback
// port in its own process group, and returns once GET /health answers 200.
// It fails the test when the bridge exits or stays unhealthy for
// opts.Ready. The cleanup it registers stops the bridge and, when the test
// failed, logs the bridge's output.
func Start(t testing.TB, opts Options) *Proc {
	t.Helper()
	bin := Build(t)
	if opts.Bearer == "" {
		opts.Bearer = rand.Text()
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Ready == 0 {
		opts.Ready = 60 * time.Second
	}
	if opts.Poll == 0 {
		opts.Poll = 50 * time.Millisecond
	}
	for attempt := 1; ; attempt++ {
		p, err := start(t, bin, opts)
		if err == nil {
			return p
		}
		if p != nil && attempt < startAttempts && strings.Contains(p.Logs(), "address already in use") {
			continue
		}
		// The cleanup of a started attempt logs its output.
		t.Fatalf("boxbridgetest: %v", err)
	}
}

// start runs one attempt; a non-nil Proc with an error has been started.
func start(t testing.TB, bin string, opts Options) (*Proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Proc{URL: "http://127.0.0.1:" + port, Bearer: opts.Bearer, DataDir: opts.DataDir,
		logs: &logBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, opts.Args...)
	p.cmd.Env = append(slices.Clip(opts.Env), "BRIDGE_HOST=127.0.0.1", "BRIDGE_PORT="+port,
		"BRIDGE_BEARER="+opts.Bearer, "BRIDGE_DATA_DIR="+opts.DataDir)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	// Its own group: a terminal's Ctrl-C does not reach it, and the cleanup
	// can end whatever it left behind.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start box-bridge: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("box-bridge at %s output:\n%s", p.URL, p.Logs())
		}
	})
	return p, p.waitHealthy(opts.Ready, opts.Poll)
}

// waitHealthy polls GET /health every poll until it answers 200, the
// process exits or ready has passed.
func (p *Proc) waitHealthy(ready, poll time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), ready)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s %s", resp.Status, bytes.TrimSpace(body))
		}
		select {
		case <-p.done:
			return fmt.Errorf("box-bridge exited before /health answered 200: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("box-bridge at %s: /health did not answer 200 within %s (last: %s)", p.URL, ready, last)
		case <-tick.C:
		}
	}
}

// stop ends the bridge: SIGTERM and up to 10s to shut down, then SIGKILL
// to its whole process group, and waits for it.
func (p *Proc) stop() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// PID is the bridge's process id, which is also its process group id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Logs returns what the bridge wrote to stdout and stderr so far.
func (p *Proc) Logs() string { return p.logs.String() }

// Signal sends sig to the bridge process alone, not its group: harness
// processes, which the bridge runs in groups of their own, live on, as
// they would after a crash.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the bridge with SIGKILL, so that no shutdown code runs, and
// waits until it has exited.
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Wait waits until the bridge has exited and returns how: nil for exit
// status 0, else an *exec.ExitError.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Done is closed once the bridge has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// freePort returns a loopback port that was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) string {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// logBuffer collects the process's output for concurrent readers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
