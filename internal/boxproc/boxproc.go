// Package boxproc holds what the vendors share about the processes they
// run in a box: where a spawned process's record lives in the box
// (Dir/<id>/{pid,stdout,stderr,exit}), the shell scripts that run and
// stop commands there, the names a process and an environment variable
// may have, and the small readers and buffers around their output. Each
// vendor runs these scripts through its own exec API.
package boxproc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Dir is where a box keeps the pid, output and exit status of each process
// started with Spawn (Dir/<id>/{pid,stdout,stderr,exit}).
const Dir = "/tmp/.boxctl/proc"

// ExecDir holds the pid files of running Exec commands, so a cancelled
// Exec can stop its command.
const ExecDir = "/tmp/.boxctl/exec"

var (
	// Name is what a process id (SpawnSpec.Name) may be.
	Name = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$`)
	// EnvName is what an environment variable's name may be.
	EnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CheckEnv refuses an environment with a name that is not EnvName.
func CheckEnv(env map[string]string) error {
	for k := range env {
		if !EnvName.MatchString(k) {
			return fmt.Errorf("environment variable name %q", k)
		}
	}
	return nil
}

// ExecWrapper runs "$@" in a session of its own whose id it records in the
// pid file $0, so that a cancelled Exec can kill the command with all its
// children (KillSession); the file goes when the command ends.
const ExecWrapper = `mkdir -p "${0%/*}" || exit 126
setsid -w sh -c 'echo $$ >"$0" && exec "$@"' "$0" "$@"
s=$?; rm -f "$0"; exit $s`

// KillSession is the command that kills the session whose id pidFile
// holds, waiting a moment for the file if the command has not written it
// yet.
func KillSession(pidFile string) []string {
	return []string{"sh", "-c", `i=0; while [ ! -s "$0" ] && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done
p=$(cat "$0" 2>/dev/null) && kill -9 "-$p" 2>/dev/null; rm -f "$0"`, pidFile}
}

// Signal is the command that sends signal number sig to the spawned
// process pid whose record is in dir; one that already ended is not an
// error (the command exits 0).
func Signal(sig, pid int, dir string) []string {
	return []string{"sh", "-c", `[ -e "$2/exit" ] || kill -"$0" "$1" 2>/dev/null || ! kill -0 "$1" 2>/dev/null`,
		fmt.Sprint(sig), fmt.Sprint(pid), dir}
}

// Logs reads what the spawned process whose record is dir printed so far,
// from its stdout and stderr files, with read (the vendor's Box.Read);
// errors name the vendor and the process.
func Logs(ctx context.Context, vendor string, read func(context.Context, string) ([]byte, error), dir string) (stdout, stderr []byte, err error) {
	if stdout, err = read(ctx, dir+"/stdout"); err == nil {
		stderr, err = read(ctx, dir+"/stderr")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: logs of %s: %w", vendor, path.Base(dir), err)
	}
	return stdout, stderr, nil
}

// PID reads the pid of the spawned process id from its record under Dir
// with read (the vendor's file read); errors name the vendor and the
// process.
func PID(ctx context.Context, vendor string, read func(context.Context, string) ([]byte, error), id string) (int, error) {
	if !Name.MatchString(id) {
		return 0, fmt.Errorf("%s: process %q: not a process id", vendor, id)
	}
	raw, err := read(ctx, Dir+"/"+id+"/pid")
	if err != nil {
		return 0, fmt.Errorf("%s: process %s: %w", vendor, id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: process %s: pid file holds %q", vendor, id, raw)
	}
	return pid, nil
}

// RandomID returns a random process or file name.
func RandomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Capped keeps the first Max bytes written to it and discards the rest.
type Capped struct {
	bytes.Buffer
	Max int64
}

// Write keeps what fits and reports all of p written.
func (c *Capped) Write(p []byte) (int, error) {
	if room := c.Max - int64(c.Len()); room > 0 {
		c.Buffer.Write(p[:min(int64(len(p)), room)])
	}
	return len(p), nil
}

// Pipes returns the readers of a process's stdout and stderr and the
// writers that feed them; closing either reader calls onClose (which stops
// the feeding) and closes that reader.
func Pipes(onClose func()) (stdout, stderr io.ReadCloser, outW, errW *io.PipeWriter) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	return &pipeCloser{PipeReader: outR, onClose: onClose}, &pipeCloser{PipeReader: errR, onClose: onClose}, outW, errW
}

type pipeCloser struct {
	*io.PipeReader
	onClose func()
}

func (c *pipeCloser) Close() error {
	c.onClose()
	return c.PipeReader.Close()
}
