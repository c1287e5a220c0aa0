package localrouter_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tangle-network/boxctl/cmd/boxctl/internal/localrouter"
)

// TestStart starts a detached endpoint that prints its URL, checks that it
// runs in a session of its own with its secret in its environment only,
// then stops it, and leaves a pid it no longer owns alone.
func TestStart(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "routers", "run-x.log")
	until := time.Now().Add(time.Minute)
	key := localrouter.NewKey()
	p, err := localrouter.Start(t.Context(), localrouter.Options{
		Command: []string{"sh", "-c", `echo "http://127.0.0.1:1/"; exec sleep 60`},
		Env:     []string{"TEST_ROUTER_KEY=" + key}, Log: logPath, Until: until})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	if !p.Running() || p.URL != "http://127.0.0.1:1/" || !p.Until.Equal(until) || p.Log != logPath {
		t.Fatalf("Start() = %+v, want a running endpoint at http://127.0.0.1:1/", p)
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Field 6 (after the command's parenthesis: state ppid pgrp session)
	// is the session: the endpoint leads its own.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if f[3] != strconv.Itoa(p.PID) {
		t.Errorf("session of the endpoint = %s, want its own (%d)", f[3], p.PID)
	}
	environ, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/environ")
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
	if !strings.Contains(string(environ), key) || strings.Contains(string(cmdline), key) {
		t.Errorf("the key is in environ %v, cmdline %v; want environ only", strings.Contains(string(environ), key), strings.Contains(string(cmdline), key))
	}
	if fi, err := os.Stat(logPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log = %v, %v; want mode 0600", fi, err)
	}
	pid := p.PID
	if err := p.StopAndClean(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Errorf("Running() after Stop = true")
	}
	if _, err := os.Stat(logPath); !os.IsNotExist(err) {
		t.Errorf("log after StopAndClean: %v, want it removed", err)
	}
	other := &localrouter.Process{PID: os.Getpid(), Start: "1"}
	if other.Running() || other.Stop() != nil {
		t.Errorf("a process with another start time is taken for the endpoint (pid %d)", pid)
	}
	var none *localrouter.Process
	if none.Running() || none.StopAndClean() != nil {
		t.Errorf("a nil Process runs or fails to stop")
	}
}

func TestStart_Failures(t *testing.T) {
	tests := []struct {
		name    string
		command string
		timeout time.Duration
		want    string
	}{
		{"exits", `exit 3`, time.Minute, "exited"},
		{"not a URL", `echo "listening"; exec sleep 60`, time.Minute, "not its URL"},
		{"too slow", `exec sleep 60`, 200 * time.Millisecond, "did not start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := localrouter.Start(t.Context(), localrouter.Options{Command: []string{"sh", "-c", tt.command},
				Log: filepath.Join(t.TempDir(), "r.log"), StartTimeout: tt.timeout})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start(%s) = %v, want an error with %q", tt.command, err, tt.want)
			}
		})
	}
}
