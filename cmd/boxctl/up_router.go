package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tangle-network/boxctl/provider/sandbox"
)

// localReply is what the local model endpoint of `up --router local`
// answers every model request with.
const localReply = "Hello from inside the box: the local model endpoint answered."

// routerStartTimeout bounds the wait for the local model endpoint to
// print its address.
const routerStartTimeout = 15 * time.Second

// localRouter is a local model endpoint (`boxctl router-stub`) that `up
// --router local` started for one box. It runs detached in a session of
// its own until Until (the box's deadline and a margin), or until `rm`
// or `gc` stops it.
type localRouter struct {
	PID int `json:"pid"`
	// Start is the process's start time in clock ticks since boot, so a
	// later process that reuses the pid is never taken for it.
	Start string    `json:"start"`
	URL   string    `json:"url"`
	Until time.Time `json:"until"`
	// Log is the file its output goes to.
	Log string `json:"log"`
}

// hostAddresser is a vendor that knows where a server on this machine is
// reachable from its boxes (docker.Vendor.HostAddress).
type hostAddresser interface {
	HostAddress(ctx context.Context) (string, error)
}

// newRouterKey returns a fresh random key for a local model endpoint.
func newRouterKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startLocalRouter starts `boxctl router-stub` of this binary, detached,
// listening on host (any free port) with key, which it gets through its
// environment, never its command line. It returns once the endpoint
// prints its URL.
func startLocalRouter(ctx context.Context, host, key string, until time.Time, logPath string) (*localRouter, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, "router-stub", "--addr", net.JoinHostPort(host, "0"),
		"--until", strconv.FormatInt(until.Unix(), 10), "--reply", localReply)
	cmd.Env = append(os.Environ(), routerKeyEnv+"="+key)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("local model endpoint: %w", err)
	}
	r := &localRouter{PID: cmd.Process.Pid, Start: sandbox.ProcessStart(cmd.Process.Pid), Until: until, Log: logPath}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it, whenever it ends

	ctx, cancel := context.WithTimeout(ctx, routerStartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if u := firstLine(logPath); u != "" {
			if pu, err := url.Parse(u); err != nil || pu.Host == "" {
				r.stop()
				return nil, fmt.Errorf("local model endpoint printed %q, not its URL", u)
			}
			r.URL = u
			return r, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("local model endpoint exited (%v): %s", err, tailFile(logPath, 2000))
		case <-ctx.Done():
			r.stop()
			return nil, fmt.Errorf("local model endpoint did not start within %v: %w", routerStartTimeout, context.Cause(ctx))
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

// running reports whether the endpoint's process still runs.
func (r *localRouter) running() bool {
	return r.PID > 0 && r.Start != "" && sandbox.ProcessStart(r.PID) == r.Start
}

// stop ends the endpoint's session (SIGTERM, then SIGKILL after a grace)
// if its process still runs; a process that ended, or a pid some other
// process now has, is left alone.
func (r *localRouter) stop() error {
	if !r.running() {
		return nil
	}
	if err := syscall.Kill(-r.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop local model endpoint (pid %d): %w", r.PID, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.running() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(-r.PID, syscall.SIGKILL)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
