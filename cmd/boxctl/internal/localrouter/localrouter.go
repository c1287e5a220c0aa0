package localrouter

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/vendors/reaper"
)

// DefaultStartTimeout bounds the wait for the endpoint to print its URL.
const DefaultStartTimeout = 15 * time.Second

// stopGrace separates SIGTERM from SIGKILL in Stop.
const stopGrace = 5 * time.Second

// Process is a local model endpoint Start started. It runs detached until
// Until, or until Stop.
type Process struct {
	PID int `json:"pid"`
	// Start is the process's start time in clock ticks since boot, so a
	// later process that reuses the pid is never taken for it.
	Start string    `json:"start"`
	URL   string    `json:"url"`
	Until time.Time `json:"until"`
	// Log is the file its output goes to.
	Log string `json:"log"`
}

// Options are what Start runs.
type Options struct {
	// Command is the program and its arguments; required. Secrets go in
	// Env, never here.
	Command []string
	// Env is added to this process's environment for the endpoint.
	Env []string
	// Log is the file (created 0600, parents 0700) the endpoint's output
	// goes to; required. Its first line is the endpoint's URL.
	Log string
	// Until is when the endpoint ends by itself (the command says so);
	// recorded in the Process.
	Until time.Time
	// StartTimeout bounds the wait for the URL. Default:
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

// NewKey returns a fresh random key for a local model endpoint.
func NewKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start starts the endpoint, detached in a session of its own, and
// returns once it printed its URL. A process that exits first, prints
// something else, or takes longer than StartTimeout (or ctx) is an error,
// and the process is stopped.
func Start(ctx context.Context, o Options) (*Process, error) {
	if len(o.Command) == 0 || o.Log == "" {
		return nil, errors.New("local model endpoint: a command and a log file are required")
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if err := os.MkdirAll(filepath.Dir(o.Log), 0o700); err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	logf, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	p := &Process{PID: cmd.Process.Pid, Start: reaper.ProcessStart(cmd.Process.Pid), Until: o.Until, Log: o.Log}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it, whenever it ends

	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if u := firstLine(o.Log); u != "" {
			if pu, err := url.Parse(u); err != nil || pu.Host == "" {
				_ = p.Stop()
				return nil, fmt.Errorf("local model endpoint printed %q, not its URL", u)
			}
			p.URL = u
			return p, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("local model endpoint exited (%v): %s", err, tailFile(o.Log, 2000))
		case <-ctx.Done():
			_ = p.Stop()
			return nil, fmt.Errorf("local model endpoint did not start within %v: %w", o.StartTimeout, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// firstLine returns the first complete line of the file at path.
func firstLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSpace(line)
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// Running reports whether the endpoint's process still runs.
func (p *Process) Running() bool {
	return p != nil && p.PID > 0 && p.Start != "" && reaper.ProcessStart(p.PID) == p.Start
}

// Stop ends the endpoint's session (SIGTERM, then SIGKILL after a grace)
// if its process still runs; a process that ended, or a pid some other
// process now has, is left alone. A nil Process is nothing to stop.
func (p *Process) Stop() error {
	if !p.Running() {
		return nil
	}
	if err := syscall.Kill(-p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop local model endpoint (pid %d): %w", p.PID, err)
	}
	deadline := time.Now().Add(stopGrace)
	for p.Running() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-p.PID, syscall.SIGKILL)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// StopAndClean stops the endpoint and, once it is stopped, removes its
// log. A nil Process is nothing to stop.
func (p *Process) StopAndClean() error {
	if p == nil {
		return nil
	}
	if err := p.Stop(); err != nil {
		return err
	}
	if p.Log != "" {
		_ = os.Remove(p.Log)
	}
	return nil
}
