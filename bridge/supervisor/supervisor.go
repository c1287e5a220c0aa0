// Package supervisor keeps a box's bridge serving through its own crash.
//
// box-bridge -supervise runs as the supervisor: a small parent process
// that listens on the bridge's port once, holds the secrets (the bearer,
// the router key) in its memory only, and runs the serving bridge as its
// child. The child gets the listening socket as a file (so connections
// that arrive while it restarts wait in the socket's backlog instead of
// being refused) and its secrets over a socket pair, never in its
// environment, its argument vector or a file. A child that dies is started
// again on the same data directory with the same secrets; its store ends
// the runs the dead child left live and readers resume from their cursor.
//
// The secrets cross only once the child showed it can keep them: it makes
// itself non-dumpable and then says so on the socket pair, and the parent
// checks that no process traces it before it writes. A socket, unlike a
// pipe, cannot be opened again through /proc/<pid>/fd, so no other process
// of the box's user can read the handover. The supervisor is non-dumpable
// itself (box-bridge's main does that before anything else).
//
// A child that keeps crashing (MaxCrashes within Window) is not started
// again: the supervisor then answers every request on the port itself with
// 503, /health as wire.HealthCrashLoop with the reason, every other route
// a wire.TypeBridgeCrashLoop error, until it is stopped.
package supervisor

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/bridge/wire"
)

// Defaults of Options.
const (
	DefaultMaxCrashes = 5
	DefaultWindow     = time.Minute
	// DefaultHandoverTimeout bounds a child's start up to the handover.
	DefaultHandoverTimeout = 10 * time.Second
)

// The file descriptors a child gets its listener and its secrets on.
const (
	ListenerFD = 3
	SecretsFD  = 4
)

// readyByte is what a child writes once it is non-dumpable.
const readyByte = 'R'

// Options configure Run.
type Options struct {
	// Listener is the bridge's listening socket, a *net.TCPListener (or
	// any listener with a File method); Run closes it when it returns.
	Listener interface {
		net.Listener
		File() (*os.File, error)
	}
	// Command is the child's argument vector: Command[0] is the
	// executable's path.
	Command []string
	// Env is the child's environment; it must hold no secret.
	Env []string
	// Secrets are the variables the child reads from the handover
	// instead of its environment.
	Secrets map[string]string
	// Stdout and Stderr receive the child's output (nil discards it).
	Stdout, Stderr io.Writer
	// Log receives the supervisor's own lines (restarts, the crash loop).
	Log *slog.Logger
	// Backends are the backend names /health reports in a crash loop.
	Backends []string
	// MaxCrashes crashes within Window end the restarts.
	MaxCrashes int
	Window     time.Duration
	// Backoff is the delay before the nth restart (n from 1) within the
	// window; default: 0 for the first, then 100 ms doubling up to 2 s.
	Backoff func(n int) time.Duration
	// HandoverTimeout bounds a child's start up to its handover.
	HandoverTimeout time.Duration
	// Started, if set, is called with each child's pid once it holds its
	// secrets (tests use it to kill the child).
	Started func(pid int)
}

// CrashLoopError is the reason a supervisor stopped restarting.
type CrashLoopError struct {
	Crashes int
	Window  time.Duration
	// Last is how the last child ended ("exit status 2", "signal:
	// killed", or why it did not start).
	Last string
}

func (e *CrashLoopError) Error() string {
	return fmt.Sprintf("the serving bridge crashed %d times within %v and is not restarted; last: %s", e.Crashes, e.Window, e.Last)
}

func (o *Options) defaults() {
	if o.MaxCrashes <= 0 {
		o.MaxCrashes = DefaultMaxCrashes
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.HandoverTimeout <= 0 {
		o.HandoverTimeout = DefaultHandoverTimeout
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration {
			if n <= 1 {
				return 0
			}
			return min(100*time.Millisecond<<(n-2), 2*time.Second)
		}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
}

// Run supervises children until ctx ends (then it stops the running child
// with SIGTERM, waits for it and returns its error, nil for a clean exit)
// or a crash loop; then it answers on the listener until ctx ends and
// returns the *CrashLoopError.
func Run(ctx context.Context, o Options) error {
	o.defaults()
	defer o.Listener.Close()
	lf, err := o.Listener.File()
	if err != nil {
		return fmt.Errorf("supervisor: listener: %w", err)
	}
	defer lf.Close()
	var crashes []time.Time
	for {
		started := time.Now()
		err := o.runChild(ctx, lf)
		if ctx.Err() != nil {
			return err
		}
		if err == nil {
			// A child that exits 0 was asked to (its own SIGTERM): the
			// box's bridge is done.
			return nil
		}
		now := time.Now()
		crashes = append(slices.DeleteFunc(crashes, func(t time.Time) bool { return now.Sub(t) > o.Window }), now)
		if len(crashes) >= o.MaxCrashes {
			cl := &CrashLoopError{Crashes: len(crashes), Window: o.Window, Last: err.Error()}
			o.Log.Error("bridge crash loop", "err", cl)
			serveCrashLoop(ctx, o.Listener, o.Backends, cl)
			return cl
		}
		delay := o.Backoff(len(crashes))
		o.Log.Warn("serving bridge ended; restarting", "err", err, "ran", now.Sub(started).Round(time.Millisecond),
			"restart", len(crashes), "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// runChild starts one child, hands it its secrets and waits for it.
func (o *Options) runChild(ctx context.Context, lf *os.File) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket pair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "secrets"), os.NewFile(uintptr(fds[1]), "secrets-child")
	defer mine.Close()
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Env = o.Env
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	cmd.ExtraFiles = []*os.File{lf, theirs} // fds 3 and 4
	// The child dies with the supervisor, never outlives it serving.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if err := o.handover(mine, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		<-waited
		return fmt.Errorf("handover: %w", err)
	}
	mine.Close()
	if o.Started != nil {
		o.Started(cmd.Process.Pid)
	}
	select {
	case err := <-waited:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return <-waited
	}
}

// handover waits for the child's ready byte, checks that nothing traces
// it, and writes its secrets: one NAME=base64(value) line each, then it
// closes its end.
func (o *Options) handover(conn *os.File, pid int) error {
	_ = conn.SetDeadline(time.Now().Add(o.HandoverTimeout))
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != readyByte {
		return fmt.Errorf("the child did not report ready (%v)", err)
	}
	if tracer, err := tracerPid(pid); err != nil || tracer != 0 {
		return fmt.Errorf("the child is traced by %d (%v): its secrets are withheld", tracer, err)
	}
	var buf strings.Builder
	for _, k := range slices.Sorted(maps.Keys(o.Secrets)) {
		buf.WriteString(k + "=" + base64.StdEncoding.EncodeToString([]byte(o.Secrets[k])) + "\n")
	}
	buf.WriteString("\n")
	_, err := io.WriteString(conn, buf.String())
	return err
}

// tracerPid reads the TracerPid of process pid.
func tracerPid(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // no /proc: nothing to check
	}
	if err != nil {
		return -1, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return -1, errors.New("no TracerPid in its status")
}

// Child is what a supervised bridge gets from its supervisor.
type Child struct {
	// Listener is the bridge's listening socket.
	Listener net.Listener
	// Secrets are the variables handed over.
	Secrets map[string]string
}

// Receive is the child's side of the handover, called once the process
// is non-dumpable: it takes the listener on ListenerFD and reads the
// secrets from SecretsFD.
func Receive() (*Child, error) {
	lf := os.NewFile(ListenerFD, "listener")
	sf := os.NewFile(SecretsFD, "secrets")
	if lf == nil || sf == nil {
		return nil, errors.New("supervisor: no listener or secrets descriptor")
	}
	defer sf.Close()
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return nil, fmt.Errorf("supervisor: listener: %w", err)
	}
	secrets, err := receiveSecrets(sf)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &Child{Listener: ln, Secrets: secrets}, nil
}

func receiveSecrets(conn io.ReadWriter) (map[string]string, error) {
	if _, err := conn.Write([]byte{readyByte}); err != nil {
		return nil, fmt.Errorf("supervisor: handover: %w", err)
	}
	secrets := map[string]string{}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("supervisor: handover cut short: %w", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return secrets, nil
		}
		k, v, ok := strings.Cut(line, "=")
		val, err := base64.StdEncoding.DecodeString(v)
		if !ok || err != nil {
			return nil, errors.New("supervisor: handover: a malformed line")
		}
		secrets[k] = string(val)
	}
}

// serveCrashLoop answers every request on ln with the crash loop until
// ctx ends.
func serveCrashLoop(ctx context.Context, ln net.Listener, backends []string, cl *CrashLoopError) {
	h := CrashLoopHandler(backends, cl)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) })
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	wg.Wait()
}

// CrashLoopHandler answers what a box in a crash loop answers: /health
// 503 wire.HealthCrashLoop with each backend in error and the reason, any
// other route 503 with a wire.TypeBridgeCrashLoop error. The reason names
// only counts and exit statuses, so it may be shown without a bearer.
func CrashLoopHandler(backends []string, cl *CrashLoopError) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.URL.Path == "/health" {
			h := wire.Health{Status: wire.HealthCrashLoop, Backends: []wire.BackendHealth{}}
			for _, b := range backends {
				h.Backends = append(h.Backends, wire.BackendHealth{Name: b, State: wire.BackendError, Detail: cl.Error(),
					ProbedAt: time.Now().UnixMilli()})
			}
			_ = json.NewEncoder(w).Encode(h)
			return
		}
		_ = json.NewEncoder(w).Encode(wire.ErrorResponse{Error: wire.ErrorBody{Type: wire.TypeBridgeCrashLoop,
			Message: cl.Error(), Status: http.StatusServiceUnavailable}})
	})
}
